/* egress.c - the egress proxy's lifecycle: its loop thread, per-sandbox unix sockets,
 * and commands marshalled onto the loop thread. Connections are in proxy.c. */
#include "egress/egress.h"

#include <errno.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "egress/egress_int.h"
#include "egress/tunnel.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/paths.h"
#include "util/xalloc.h"

struct sbx_egress_conn *sbx_egress_conn_next(struct sbx_egress_conn *c);

struct sbx_egress_cmd {
    void (*fn)(struct sbx_egress *e, void *arg);
    void *arg;
    int done;
    struct sbx_egress_cmd *next;
};

static pthread_once_t threads_once = PTHREAD_ONCE_INIT;

static void threads_init(void)
{
    evthread_use_pthreads();
}

/* Runs fn on the loop thread and waits for it (or runs it here when this is the loop
 * thread, or the egress has no thread of its own). */
static void run_on_loop(struct sbx_egress *e, void (*fn)(struct sbx_egress *, void *), void *arg)
{
    struct sbx_egress_cmd cmd = {fn, arg, 0, NULL};
    struct sbx_egress_cmd **tail;

    if (!e->threaded || pthread_equal(pthread_self(), e->thread)) {
        fn(e, arg);
        return;
    }
    pthread_mutex_lock(&e->mu);
    for (tail = &e->cmds; *tail != NULL; tail = &(*tail)->next) {
    }
    *tail = &cmd;
    pthread_mutex_unlock(&e->mu);
    event_active(e->wake, EV_READ, 0);
    pthread_mutex_lock(&e->mu);
    while (!cmd.done) {
        pthread_cond_wait(&e->cond, &e->mu);
    }
    pthread_mutex_unlock(&e->mu);
}

static void wake_cb(evutil_socket_t fd, short what, void *arg)
{
    struct sbx_egress *e = arg;
    struct sbx_egress_cmd *list;

    (void)fd;
    (void)what;
    pthread_mutex_lock(&e->mu);
    list = e->cmds;
    e->cmds = NULL;
    pthread_mutex_unlock(&e->mu);
    while (list != NULL) {
        struct sbx_egress_cmd *next = list->next;

        list->fn(e, list->arg);
        pthread_mutex_lock(&e->mu);
        list->done = 1;
        pthread_cond_broadcast(&e->cond);
        pthread_mutex_unlock(&e->mu);
        list = next;
    }
}

static void *loop_main(void *arg)
{
    struct sbx_egress *e = arg;

    event_base_loop(e->base, EVLOOP_NO_EXIT_ON_EMPTY);
    return NULL;
}

static void egress_free(struct sbx_egress *e)
{
    if (e->dns != NULL) {
        evdns_base_free(e->dns, 1);
    }
    if (e->wake != NULL) {
        event_free(e->wake);
    }
    if (e->own_base && e->base != NULL) {
        event_base_free(e->base);
    }
    sbx_egress_log_close(&e->log);
    if (e->reserve_fd >= 0) {
        close(e->reserve_fd);
    }
    for (size_t i = 0; i < e->n_hosts; i++) {
        free(e->hosts[i].name);
    }
    free(e->hosts);
    for (size_t i = 0; i < e->n_private_nets; i++) {
        free(e->private_nets[i].name);
        free(e->private_nets[i].cidr);
    }
    free(e->private_nets);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cond);
    free(e);
}

/* egress.hosts and egress.private_allow into e->hosts and e->private_nets: an address
 * is where the name goes, a CIDR filters its DNS answers (config.h). */
static void static_hosts_load(struct sbx_egress *e, const struct sbx_config *cfg)
{
    size_t n = cfg->egress.n_hosts;

    for (size_t i = 0; i < cfg->egress.n_private_allow; i++) {
        for (char **a = cfg->egress.private_allow[i].addresses; *a != NULL; a++) {
            n++;
        }
    }
    e->hosts = xcalloc(n + 1, sizeof(*e->hosts));
    e->private_nets = xcalloc(n + 1, sizeof(*e->private_nets));
    for (size_t i = 0; i < cfg->egress.n_hosts; i++) {
        e->hosts[i].name = xstrdup(cfg->egress.hosts[i].name);
        sbx_egress_addr_parse(cfg->egress.hosts[i].address, &e->hosts[i].addr);
        e->hosts[i].src = "egress.hosts";
        e->n_hosts++;
    }
    for (size_t i = 0; i < cfg->egress.n_private_allow; i++) {
        const struct sbx_egress_private *p = &cfg->egress.private_allow[i];

        for (char **a = p->addresses; *a != NULL; a++) {
            if (strchr(*a, '/') == NULL) {
                struct sbx_egress_static_host *h = &e->hosts[e->n_hosts++];

                h->name = xstrdup(p->name);
                sbx_egress_addr_parse(*a, &h->addr);
                h->src = "egress.private_allow";
            }
            else {
                struct sbx_egress_private_net *pn = &e->private_nets[e->n_private_nets++];

                pn->name = xstrdup(p->name);
                pn->cidr = xstrdup(*a);
            }
        }
    }
}

/* The egress's own loop: tunnels at the lowest priority, and a look for new events
 * after each tunnel callback, so that setting up a connection never waits behind every
 * busy tunnel's turn (docs/egress.md, Fairness). -1 (e->base NULL): none. */
static int own_base_new(struct sbx_egress *e)
{
    struct event_config *ec = event_config_new();

    if (ec != NULL) {
        event_config_set_max_dispatch_interval(ec, NULL, 1, SBX_EGRESS_PRIO_BULK);
        e->base = event_base_new_with_config(ec);
        event_config_free(ec);
    }
    if (e->base != NULL && event_base_priority_init(e->base, SBX_EGRESS_PRIORITIES) < 0) {
        event_base_free(e->base);
        e->base = NULL;
    }
    e->own_base = 1;
    return e->base != NULL ? 0 : -1;
}

/* Names not in egress.hosts go to the system's resolvers (/etc/resolv.conf and
 * /etc/hosts). Without them every such name fails closed. */
static void dns_init(struct sbx_egress *e, const struct sbx_config *cfg)
{
    /* egress.system_dns = false: only egress.hosts names resolve (tests use
     * this so that no query ever leaves the machine) */
    e->dns = cfg->egress.system_dns ? evdns_base_new(e->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                                                  EVDNS_BASE_DISABLE_WHEN_INACTIVE)
                                    : NULL;
    if (e->dns == NULL && cfg->egress.system_dns) {
        sbx_log(SBX_LOG_WARN, "egress: no DNS resolver configured; only egress.hosts names "
                              "resolve");
    }
    else if (e->dns != NULL) {
        /* Names are resolved exactly as the rule matched them: no search domains. */
        evdns_base_search_clear(e->dns);
    }
}

static struct sbx_egress *egress_new(struct event_base *base, const struct sbx_config *cfg,
                                     const char *log, sbx_error_t **err)
{
    struct sbx_egress *e = xcalloc(1, sizeof(*e));

    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cond, NULL);
    e->log.fd = -1;
    e->reserve_fd = -1;
    e->header_timeout.tv_sec = cfg->egress.header_timeout;
    e->connect_timeout.tv_sec = cfg->egress.connect_timeout;
    e->check_sni = cfg->egress.check_sni;
    e->max_conns = (size_t)cfg->egress.max_connections;
    e->max_buffer = (uint64_t)cfg->egress.max_buffer;
    e->socket_buffer = (int)cfg->egress.socket_buffer;
    e->conn_rate = (double)cfg->egress.connection_rate;
    e->share.bandwidth = (uint64_t)cfg->egress.bandwidth;
    /* A spare descriptor, given up when accept() hits EMFILE to take the pending
     * connection and close it with a logged reason (proxy.c). */
    e->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    static_hosts_load(e, cfg);
    if (sbx_egress_log_open(&e->log, log, err) < 0) {
        egress_free(e);
        return NULL;
    }
    e->base = base;
    if (e->base == NULL && own_base_new(e) < 0) {
        egress_free(e);
        sbx_error_set(err, SBX_E_GENERIC, "egress: cannot create an event loop");
        return NULL;
    }
    e->wake = event_new(e->base, -1, 0, wake_cb, e);
    dns_init(e, cfg);
    return e;
}

struct sbx_egress *sbx_egress_attach(struct event_base *base, const struct sbx_config *cfg,
                                     sbx_error_t **err)
{
    return egress_new(base, cfg, cfg->egress.log, err);
}

struct sbx_egress *sbx_egress_start(const struct sbx_config *cfg, sbx_error_t **err)
{
    return sbx_egress_start_log(cfg, cfg->egress.log, err);
}

struct sbx_egress *sbx_egress_start_log(const struct sbx_config *cfg, const char *log,
                                        sbx_error_t **err)
{
    struct sbx_egress *e;
    int rc;

    pthread_once(&threads_once, threads_init);
    e = egress_new(NULL, cfg, log, err);
    if (e == NULL) {
        return NULL;
    }
    rc = pthread_create(&e->thread, NULL, loop_main, e);
    if (rc != 0) {
        egress_free(e);
        sbx_error_set(err, SBX_E_GENERIC, "egress: cannot start its thread: %s", strerror(rc));
        return NULL;
    }
    e->threaded = 1;
    return e;
}

static void sandbox_free(struct sbx_egress_sandbox *sb)
{
    while (sb->conns != NULL) {
        sbx_egress_conn_close(sb->conns, "sandbox-removed");
    }
    if (sb->listener != NULL) {
        evconnlistener_free(sb->listener);
        unlink(sb->sock);
    }
    if (sb->next_turn != NULL) {
        event_free(sb->next_turn);
    }
    if (sb->resume != NULL) {
        event_free(sb->resume);
    }
    sbx_egress_rules_free(&sb->rules);
    free(sb->dir);
    free(sb->sock);
    free(sb->job);
    free(sb->task);
    free(sb->name);
    free(sb);
}

static int listen_unix(const char *path, sbx_error_t **err)
{
    cleanup_close int fd = -1;
    struct sockaddr_un sun;
    struct stat st;

    if (strlen(path) >= sizeof(sun.sun_path)) {
        return sbx_error_set(err, SBX_E_GENERIC, "egress: socket path '%s' is too long", path);
    }
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    strcpy(sun.sun_path, path);
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            return sbx_error_set(err, SBX_E_GENERIC, "egress: '%s' exists and is not a socket",
                                 path);
        }
        unlink(path);
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || chmod(path, 0666) < 0 ||
        listen(fd, 256) < 0) {
        return sbx_error_set(err, SBX_E_GENERIC, "egress: cannot listen on '%s': %s", path,
                             strerror(errno));
    }
    return sbx_steal_fd(&fd);
}

struct add_args {
    const char *dir;
    const char *job;
    const char *task;
    const char *sandbox;
    const char *const *rules;
    sbx_error_t **err;
    int rc;
};

static struct sbx_egress_sandbox *find(struct sbx_egress *e, const char *dir,
                                       struct sbx_egress_sandbox ***link)
{
    struct sbx_egress_sandbox **p;

    for (p = &e->sandboxes; *p != NULL; p = &(*p)->next) {
        if (strcmp((*p)->dir, dir) == 0) {
            if (link != NULL) {
                *link = p;
            }
            return *p;
        }
    }
    return NULL;
}

static void do_add(struct sbx_egress *e, void *arg)
{
    struct add_args *a = arg;
    struct sbx_egress_sandbox *sb;
    int fd;

    a->rc = -1;
    if (find(e, a->dir, NULL) != NULL) {
        sbx_error_set(a->err, SBX_E_GENERIC, "egress: '%s' already has a sandbox", a->dir);
        return;
    }
    if (mkdir(a->dir, 0755) < 0 && errno != EEXIST) {
        sbx_error_set(a->err, SBX_E_GENERIC, "egress: cannot create '%s': %s", a->dir,
                      strerror(errno));
        return;
    }
    sb = xcalloc(1, sizeof(*sb));
    sb->e = e;
    sb->dir = xstrdup(a->dir);
    sb->sock = xasprintf("%s/%s", a->dir, SBX_EGRESS_SOCKET);
    sb->job = a->job ? xstrdup(a->job) : NULL;
    sb->task = a->task ? xstrdup(a->task) : NULL;
    sb->name = a->sandbox ? xstrdup(a->sandbox) : NULL;
    sb->tokens = e->conn_rate;
    clock_gettime(CLOCK_MONOTONIC, &sb->refill);
    sb->resume = evtimer_new(e->base, sbx_egress_resume, sb);
    sb->next_turn = event_new(e->base, -1, 0, sbx_egress_next_turn, sb);
    if (sb->resume == NULL || sb->next_turn == NULL) {
        sandbox_free(sb);
        sbx_error_set(a->err, SBX_E_GENERIC, "egress: cannot watch '%s': out of memory", a->dir);
        return;
    }
    if (sbx_egress_rules_parse(a->rules, &sb->rules, a->err) < 0) {
        sandbox_free(sb);
        return;
    }
    fd = listen_unix(sb->sock, a->err);
    if (fd < 0) {
        sandbox_free(sb);
        return;
    }
    sb->listener = evconnlistener_new(e->base, sbx_egress_accept, sb,
                                      LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
    if (sb->listener == NULL) {
        close(fd);
        sandbox_free(sb);
        sbx_error_set(a->err, SBX_E_GENERIC, "egress: cannot watch '%s'", a->dir);
        return;
    }
    evconnlistener_set_error_cb(sb->listener, sbx_egress_accept_error);
    sb->next = e->sandboxes;
    e->sandboxes = sb;
    a->rc = 0;
}

int sbx_egress_add(struct sbx_egress *e, const char *dir, const char *job, const char *task,
                   const char *sandbox, const char *const *allow_rules, sbx_error_t **err)
{
    struct add_args a = {dir, job, task, sandbox, allow_rules, err, -1};

    run_on_loop(e, do_add, &a);
    return a.rc;
}

struct query_args {
    const char *dir;
    struct sbx_egress_summary *out;
    int remove;
    int rc;
};

static void do_query(struct sbx_egress *e, void *arg)
{
    struct query_args *q = arg;
    struct sbx_egress_sandbox **link = NULL;
    struct sbx_egress_sandbox *sb = find(e, q->dir, &link);

    q->rc = -1;
    if (sb == NULL) {
        return;
    }
    if (q->remove) {
        *link = sb->next;
        /* Close connections first: their lines count in the summary. */
        while (sb->conns != NULL) {
            sbx_egress_conn_close(sb->conns, "sandbox-removed");
        }
    }
    if (q->out != NULL) {
        q->out->allowed = sb->allowed;
        q->out->denied = sb->denied;
        q->out->log_errors = e->log.errors;
        q->out->open = sb->n_conns;
        q->out->refused = sb->refused;
        q->out->reserved = sb->reserved;
        q->out->held = sbx_egress_held(sb);
    }
    if (q->remove) {
        sandbox_free(sb);
    }
    q->rc = 0;
}

int sbx_egress_summary(struct sbx_egress *e, const char *dir, struct sbx_egress_summary *out)
{
    struct query_args q = {dir, out, 0, -1};

    run_on_loop(e, do_query, &q);
    return q.rc;
}

int sbx_egress_remove(struct sbx_egress *e, const char *dir, struct sbx_egress_summary *out)
{
    struct query_args q = {dir, out, 1, -1};

    run_on_loop(e, do_query, &q);
    return q.rc;
}

struct job_args {
    const char *dir;
    const char *job;
    int rc;
};

static void do_set_job(struct sbx_egress *e, void *arg)
{
    struct job_args *a = arg;
    struct sbx_egress_sandbox *sb = find(e, a->dir, NULL);

    a->rc = -1;
    if (sb == NULL) {
        return;
    }
    free(sb->job);
    sb->job = a->job ? xstrdup(a->job) : NULL;
    a->rc = 0;
}

int sbx_egress_set_job(struct sbx_egress *e, const char *dir, const char *job)
{
    struct job_args a = {dir, job, -1};

    run_on_loop(e, do_set_job, &a);
    return a.rc;
}

struct rebind_args {
    const char *dir;
    const char *job;
    const char *task;
    const char *const *rules;
    sbx_error_t **err;
    int rc;
};

/* The sandbox of a->dir with a->rules parsed in place of its own; NULL with
 * *a->err set (its rules unchanged). */
static struct sbx_egress_sandbox *replace_rules(struct sbx_egress *e, struct rebind_args *a)
{
    struct sbx_egress_sandbox *sb = find(e, a->dir, NULL);
    struct sbx_egress_rules rules = {0};

    if (sb == NULL) {
        sbx_error_set(a->err, SBX_E_GENERIC, "egress: '%s' has no sandbox", a->dir);
        return NULL;
    }
    if (sbx_egress_rules_parse(a->rules, &rules, a->err) < 0) {
        return NULL;
    }
    sbx_egress_rules_free(&sb->rules);
    sb->rules = rules;
    return sb;
}

/* A warm sandbox claimed by a task: that task's names and rules, its own
 * counts from zero, and nothing opened before the claim kept open. */
static void do_rebind(struct sbx_egress *e, void *arg)
{
    struct rebind_args *a = arg;
    struct sbx_egress_sandbox *sb = replace_rules(e, a);

    a->rc = -1;
    if (sb == NULL) {
        return;
    }
    while (sb->conns != NULL) {
        sbx_egress_conn_close(sb->conns, "sandbox-claimed");
    }
    free(sb->job);
    sb->job = a->job ? xstrdup(a->job) : NULL;
    free(sb->task);
    sb->task = a->task ? xstrdup(a->task) : NULL;
    free(sb->name);
    sb->name = a->task ? xstrdup(a->task) : NULL;
    sb->allowed = 0;
    sb->denied = 0;
    sb->refused = 0;
    a->rc = 0;
}

int sbx_egress_rebind(struct sbx_egress *e, const char *dir, const char *job, const char *task,
                      const char *const *allow_rules, sbx_error_t **err)
{
    struct rebind_args a = {dir, job, task, allow_rules, err, -1};

    run_on_loop(e, do_rebind, &a);
    return a.rc;
}

/* (added) `sbx task allow|deny`: new rules for the next connection; open ones,
 * the names and the counts stay. */
static void do_set_rules(struct sbx_egress *e, void *arg)
{
    struct rebind_args *a = arg;

    a->rc = replace_rules(e, a) != NULL ? 0 : -1;
}

int sbx_egress_set_rules(struct sbx_egress *e, const char *dir, const char *const *allow_rules,
                         sbx_error_t **err)
{
    struct rebind_args a = {dir, NULL, NULL, allow_rules, err, -1};

    run_on_loop(e, do_set_rules, &a);
    return a.rc;
}

static void do_stop(struct sbx_egress *e, void *arg)
{
    (void)arg;
    while (e->sandboxes != NULL) {
        struct sbx_egress_sandbox *sb = e->sandboxes;

        e->sandboxes = sb->next;
        sandbox_free(sb);
    }
    if (e->threaded) {
        event_base_loopbreak(e->base);
    }
}

void sbx_egress_stop(struct sbx_egress *e)
{
    if (e == NULL) {
        return;
    }
    run_on_loop(e, do_stop, NULL);
    if (e->threaded) {
        pthread_join(e->thread, NULL);
    }
    egress_free(e);
}

const char *const sbx_egress_sandbox_env[] = {
    "HTTP_PROXY=" SBX_EGRESS_PROXY_URL,
    "HTTPS_PROXY=" SBX_EGRESS_PROXY_URL,
    "http_proxy=" SBX_EGRESS_PROXY_URL,
    "https_proxy=" SBX_EGRESS_PROXY_URL,
    "NO_PROXY=localhost,127.0.0.1,::1",
    "no_proxy=localhost,127.0.0.1,::1",
    "NODE_USE_ENV_PROXY=1",
    NULL,
};

char *sbx_egress_relay_path(sbx_error_t **err)
{
    const char *env = getenv("SBX_RELAY");
    char *p;

    if (env != NULL && env[0] != '\0') {
        if (access(env, X_OK) < 0) {
            sbx_error_set(err, SBX_E_CONFIG, "egress: SBX_RELAY '%s' is not executable: %s", env,
                          strerror(errno));
            return NULL;
        }
        return xstrdup(env);
    }
    p = sbx_libexec_path("sbx-relay");
    if (p == NULL) {
        char *dir = sbx_asset_dir(SBX_ASSET_LIBEXEC);

        sbx_error_set(err, SBX_E_CONFIG,
                      "egress: sbx-relay not found in %s (set SBX_RELAY or SBX_LIBEXEC_DIR)",
                      dir ? dir : "the binary's libexec dir");
        free(dir);
    }
    return p;
}
