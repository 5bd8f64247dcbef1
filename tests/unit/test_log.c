/* test_log.c - logs fit journald (issue 20, item 8): with stderr the stream
 * $JOURNAL_STREAM names, each line starts with its sd-daemon(3) priority
 * (`<3>` error ... `<7>` debug), text and JSON; not with the variable unset,
 * malformed or naming another stream; and `sbx serve` stopped by SIGTERM says
 * so at info (`<6>`), every line of its stderr prefixed. */
#include "test_common.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "util/log.h"
#include "wait.h"

static char *dir;

static int setup(void **state)
{
    (void)state;
    dir = test_mkdtemp();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unsetenv("JOURNAL_STREAM");
    sbx_log_setup(SBX_LOG_WARN, SBX_LOG_TEXT);
    test_rm_rf(dir);
    free(dir);
    return 0;
}

/* The file's text ("" while it does not exist yet). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 1 << 16);
    size_t n;

    assert_non_null(buf);
    if (f == NULL) {
        return buf;
    }
    n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* "DEV:INODE" of fd into buf. */
static void stream_id(int fd, char *buf, size_t len)
{
    struct stat st;

    assert_int_equal(fstat(fd, &st), 0);
    snprintf(buf, len, "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
}

/* Logs one line per level with stderr on a new file and JOURNAL_STREAM set to
 * journal (NULL: unset; "self": the file's own id); returns the file's text. */
static char *log_all(const char *name, const char *journal, enum sbx_log_format format)
{
    char path[4096];
    char id[64];
    int saved = dup(STDERR_FILENO);
    int fd;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0 && saved >= 0);
    stream_id(fd, id, sizeof(id));
    if (journal == NULL) {
        unsetenv("JOURNAL_STREAM");
    }
    else {
        setenv("JOURNAL_STREAM", strcmp(journal, "self") == 0 ? id : journal, 1);
    }
    fflush(stderr);
    dup2(fd, STDERR_FILENO);
    close(fd);
    sbx_log_setup(SBX_LOG_DEBUG, format);
    sbx_error_log("disk %s", "full");
    sbx_warn("slow");
    sbx_info("ready");
    sbx_debug("detail");
    sbx_log_src("provider_docker:docker", SBX_LOG_INFO, "engine");
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    sbx_log_setup(SBX_LOG_WARN, SBX_LOG_TEXT);
    return slurp(path);
}

static void test_log_journal_text(void **state)
{
    char *t;

    (void)state;
    t = log_all("journal.log", "self", SBX_LOG_TEXT);
    assert_string_equal(t, "<3>sbx: error: disk full\n"
                           "<4>sbx: warn: slow\n"
                           "<6>sbx: info: ready\n"
                           "<7>sbx: debug: detail\n"
                           "<6>sbx: info: [provider_docker:docker] engine\n");
    free(t);
}

static void test_log_journal_json(void **state)
{
    char *t;

    (void)state;
    t = log_all("journal.json", "self", SBX_LOG_JSON);
    assert_true(strncmp(t, "<3>{\"time\":", 11) == 0);
    assert_non_null(strstr(t, "\n<4>{\"time\":"));
    assert_non_null(strstr(t, "\n<6>{\"time\":"));
    assert_non_null(strstr(t, "\n<7>{\"time\":"));
    assert_non_null(strstr(t, "\"level\":\"debug\",\"msg\":\"detail\""));
    free(t);
}

/* Not the journal: unset, another stream (stderr redirected after systemd set
 * it), garbage. */
static void test_log_not_journal(void **state)
{
    static const char *const cases[] = {NULL, "1:2", "", "abc", "12", "1:2:3", "1:2x"};

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *t = log_all("plain.log", cases[i], SBX_LOG_TEXT);

        if (strncmp(t, "sbx: error: disk full\nsbx: warn: slow\n", 38) != 0 ||
            strchr(t, '<') != NULL) {
            fail_msg("JOURNAL_STREAM=%s: %s", cases[i] ? cases[i] : "(unset)", t);
        }
        free(t);
    }
}

/* sbx serve under a (simulated) journal: SIGTERM is info. */
static void test_log_serve_sigterm(void **state)
{
    const char *build = getenv("SBX_BUILD_DIR");
    const char *plugins = getenv("SBX_TEST_PLUGINS");
    char *conf = NULL, *cfgpath, *logpath = NULL, *t;
    pid_t pid;
    int st = 0;

    (void)state;
    assert_non_null(build);
    assert_non_null(plugins);
    assert_true(asprintf(&conf,
                         "plugin_dir = \"%s\";\nstate_dir = \"%s/state\";\nprovider = \"fake\";\n"
                         "providers = { fake = { plugin = \"provider_good\"; }; };\n"
                         "limits = { cpus = 0.5; memory = \"256M\"; };\n",
                         plugins, dir) > 0);
    cfgpath = test_write_file(dir, "sbx.conf", conf);
    assert_true(asprintf(&logpath, "%s/serve.log", dir) > 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char sbx[4096];
        char id[64];
        int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int null = open("/dev/null", O_WRONLY);

        stream_id(fd, id, sizeof(id));
        setenv("JOURNAL_STREAM", id, 1);
        setenv("SBX_CONFIG", cfgpath, 1);
        dup2(fd, STDERR_FILENO);
        dup2(null, STDOUT_FILENO);
        snprintf(sbx, sizeof(sbx), "%s/sbx", build);
        execl(sbx, sbx, "--log-level", "debug", "serve", (char *)NULL);
        _exit(127);
    }
    wait_until(test_file_has(logpath, "runner: listening on"), 30, logpath,
               "sbx serve to log 'runner: listening on'");
    assert_int_equal(kill(pid, SIGTERM), 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    t = slurp(logpath);
    if (strstr(t, "<6>sbx: info: runner: Terminated: stopping\n") == NULL) {
        fail_msg("no SIGTERM line at info:\n%s", t);
    }
    for (char *p = t; *p != '\0';) {
        char *nl = strchr(p, '\n');

        if (!(p[0] == '<' && p[1] >= '3' && p[1] <= '7' && p[2] == '>') ||
            strncmp(p, "<4>", 3) == 0 || strncmp(p, "<3>", 3) == 0) {
            fail_msg("a line without a priority, or a warning or error, in a normal "
                     "start and stop:\n%s",
                     t);
        }
        p = nl ? nl + 1 : p + strlen(p);
    }
    free(t);
    free(conf);
    free(cfgpath);
    free(logpath);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_journal_text),
        cmocka_unit_test(test_log_journal_json),
        cmocka_unit_test(test_log_not_journal),
        cmocka_unit_test(test_log_serve_sigterm),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
