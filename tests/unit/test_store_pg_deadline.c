/* test_store_pg_deadline.c - (added, issue 31) every call of the PostgreSQL
 * store has a deadline, the first ones of a new connection too (pg.c,
 * pg_version_fast, once a bare PQexec that waited for as long as the server
 * said nothing).
 *
 * A fake server on loopback speaks just enough of the protocol: it lets every
 * login in and answers "SET ..." (the session's first statement), then says
 * nothing to anything else. Opening a store on it must fail within a few of
 * the store's deadlines (sbx_store_pg_deadline_ms), naming the silence, and
 * the schema version's read must have been what went unanswered. */
#include "test_common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

#define SSL_REQUEST 80877103
#define GSS_REQUEST 80877104

struct fake_pg {
    int lfd;
    int port;
    pthread_t thread;
    int logins;        /* connections let in */
    int version_asked; /* the schema version's read arrived */
    int unanswered;    /* statements left without an answer */
};

static int read_full(int fd, void *buf, size_t n)
{
    char *p = buf;

    while (n > 0) {
        ssize_t r = read(fd, p, n);

        if (r <= 0) {
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* The server thread writes without cmocka's asserts (they belong to the
 * test's thread), and a client gone is no signal. */
static void send_msg(int fd, char type, const void *body, uint32_t len)
{
    char buf[64];
    uint32_t n = htonl(len + 4);

    buf[0] = type;
    memcpy(buf + 1, &n, 4);
    memcpy(buf + 5, body, len);
    (void)send(fd, buf, 5 + len, MSG_NOSIGNAL);
}

/* The startup packet, after any SSL or GSS request (refused with 'N'). */
static int login(int fd)
{
    for (;;) {
        uint32_t len, code;
        char body[1024];

        if (read_full(fd, &len, 4) < 0) {
            return -1;
        }
        len = ntohl(len);
        if (len < 8 || len - 4 > sizeof(body) || read_full(fd, body, len - 4) < 0) {
            return -1;
        }
        memcpy(&code, body, 4);
        code = ntohl(code);
        if (code == SSL_REQUEST || code == GSS_REQUEST) {
            (void)send(fd, "N", 1, MSG_NOSIGNAL);
            continue;
        }
        {
            uint32_t ok = 0;

            send_msg(fd, 'R', &ok, 4); /* AuthenticationOk */
            send_msg(fd, 'Z', "I", 1); /* ReadyForQuery, idle */
        }
        return 0;
    }
}

static void serve(struct fake_pg *f, int fd)
{
    char body[8192];

    if (login(fd) < 0) {
        return;
    }
    __atomic_add_fetch(&f->logins, 1, __ATOMIC_SEQ_CST);
    for (;;) {
        char type;
        uint32_t len;

        if (read_full(fd, &type, 1) < 0 || read_full(fd, &len, 4) < 0) {
            return;
        }
        len = ntohl(len);
        if (len < 4 || len - 4 >= sizeof(body) || read_full(fd, body, len - 4) < 0) {
            return;
        }
        body[len - 4] = '\0';
        if (type == 'X') {
            return;
        }
        if (type == 'Q' && strncmp(body, "SET ", 4) == 0) {
            send_msg(fd, 'C', "SET", 4); /* CommandComplete */
            send_msg(fd, 'Z', "I", 1);
            continue;
        }
        /* Parse's body: the statement's name (""), then its text */
        if (type == 'P' && strstr(body + strlen(body) + 1, "schema_version") != NULL) {
            __atomic_store_n(&f->version_asked, 1, __ATOMIC_SEQ_CST);
        }
        if (type == 'Q' || type == 'S') { /* a simple query, or the end of an extended one */
            __atomic_add_fetch(&f->unanswered, 1, __ATOMIC_SEQ_CST);
        }
    }
}

static void *fake_main(void *arg)
{
    struct fake_pg *f = arg;
    int fd;

    while ((fd = accept(f->lfd, NULL, NULL)) >= 0) {
        serve(f, fd);
        close(fd);
    }
    return NULL;
}

static void fake_start(struct fake_pg *f)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);

    memset(f, 0, sizeof(*f));
    f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(f->lfd >= 0);
    assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(f->lfd, 8), 0);
    assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&a, &alen), 0);
    f->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

static void fake_stop(struct fake_pg *f)
{
    shutdown(f->lfd, SHUT_RDWR); /* wakes the accept */
    pthread_join(f->thread, NULL);
    close(f->lfd);
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_silent_server_open_ends(void **state)
{
    struct fake_pg f;
    sbx_error_t *err = NULL;
    struct sbx_store *st;
    char dsn[160];
    int64_t t0, took;

    (void)state;
    fake_start(&f);
    snprintf(dsn, sizeof(dsn),
             "postgresql://sbx@127.0.0.1:%d/sbx?sslmode=disable&gssencmode=disable", f.port);
    sbx_store_pg_limits(200, 10); /* each call's deadline: 1.2 s */
    alarm(60);                    /* a bare wait would hang here for good */
    t0 = now_ms();
    st = sbx_store_open_ex(dsn, NULL, &err);
    took = now_ms() - t0;
    alarm(0);
    assert_null(st);
    assert_non_null(err);
    assert_non_null(strstr(sbx_error_msg(err), "did not answer within 1200 ms"));
    /* the version's read, then BEGIN and ROLLBACK at most, each within its deadline */
    assert_true(took >= sbx_store_pg_deadline_ms());
    assert_true(took < 6 * sbx_store_pg_deadline_ms());
    assert_true(__atomic_load_n(&f.logins, __ATOMIC_SEQ_CST) >= 1);
    assert_int_equal(__atomic_load_n(&f.version_asked, __ATOMIC_SEQ_CST), 1);
    assert_true(__atomic_load_n(&f.unanswered, __ATOMIC_SEQ_CST) >= 1);
    sbx_error_free(&err);
    fake_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_silent_server_open_ends),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
