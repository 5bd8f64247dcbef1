/* test_guard.c - the environment guard: what it refuses, what it lets run. */
#include "test_common.h"

#include "cred/guard.h"

#define ARGV(...) ((const char *const[]){__VA_ARGS__, NULL})

static void expect_refused(const char *const *argv, const char *fragment)
{
    sbx_error_t *err = NULL;

    if (sbx_cred_guard_check(argv, &err) == 0) {
        fail_msg("'%s %s %s' was allowed", argv[0], argv[1] ? argv[1] : "",
                 argv[1] && argv[2] ? argv[2] : "");
    }
    assert_non_null(err);
    assert_int_equal(err->code, SBX_E_POLICY);
    assert_non_null(strstr(err->msg, "credentials guard: refused"));
    if (fragment != NULL && strstr(err->msg, fragment) == NULL) {
        fail_msg("got '%s', wanted '%s'", err->msg, fragment);
    }
    assert_null(strchr(err->msg, '\n'));
    sbx_error_free(&err);
}

static void expect_allowed(const char *const *argv)
{
    sbx_error_t *err = NULL;

    if (sbx_cred_guard_check(argv, &err) != 0) {
        fail_msg("'%s %s' was refused: %s", argv[0], argv[1] ? argv[1] : "", err->msg);
    }
    assert_null(err);
}

static void shell_refused(const char *script)
{
    sbx_error_t *err = NULL;

    expect_refused(ARGV("sh", "-c", script), NULL);
    if (sbx_cred_guard_check_shell(script, &err) == 0) {
        fail_msg("script '%s' was allowed", script);
    }
    sbx_error_free(&err);
}

static void shell_allowed(const char *script)
{
    expect_allowed(ARGV("sh", "-c", script));
    expect_allowed(ARGV("/bin/bash", "-lc", script));
}

static void test_guard_env_printenv(void **state)
{
    (void)state;
    expect_refused(ARGV("env"), "env without a command");
    expect_refused(ARGV("/usr/bin/env"), "env without a command");
    expect_refused(ARGV("env", "-0"), NULL);
    expect_refused(ARGV("env", "--null"), NULL);
    expect_refused(ARGV("env", "-i"), NULL);
    expect_refused(ARGV("env", "-u", "HOME"), NULL);
    expect_refused(ARGV("env", "FOO=1"), NULL);
    expect_refused(ARGV("env", "FOO=1", "printenv"), "printenv");
    expect_refused(ARGV("env", "-S", "printenv -0"), NULL);
    expect_refused(ARGV("env", "--", "env"), NULL);
    expect_refused(ARGV("busybox", "env"), NULL);
    expect_refused(ARGV("printenv"), "printenv without a name");
    expect_refused(ARGV("/usr/bin/printenv", "-0"), NULL);
    expect_refused(ARGV("printenv", "--null"), NULL);
    expect_allowed(ARGV("printenv", "HOME"));
    expect_allowed(ARGV("env", "FOO=1", "make", "test"));
    expect_allowed(ARGV("env", "-u", "HOME", "ls"));
    expect_allowed(ARGV("/usr/bin/env", "python3", "x.py"));
    expect_allowed(ARGV("environment-check"));
}

static void test_guard_builtins(void **state)
{
    (void)state;
    expect_refused(ARGV("export"), "export without a name");
    expect_refused(ARGV("export", "-p"), NULL);
    expect_refused(ARGV("set"), "set without arguments");
    expect_refused(ARGV("declare", "-px"), NULL);
    expect_refused(ARGV("typeset"), NULL);
    expect_allowed(ARGV("export", "FOO=1"));
    expect_allowed(ARGV("set", "-e"));
    expect_allowed(ARGV("declare", "-f"));
    expect_allowed(ARGV("declare", "-p", "HOME"));
}

static void test_guard_wrappers(void **state)
{
    (void)state;
    expect_refused(ARGV("infisical", "run", "--", "env"), NULL);
    expect_refused(ARGV("infisical", "run", "--env", "dev", "--", "printenv"), NULL);
    expect_refused(ARGV("infisical", "run", "--command", "env | sort"), NULL);
    expect_refused(ARGV("infisical", "run", "--command=printenv"), NULL);
    expect_refused(ARGV("sudo", "-u", "root", "env"), NULL);
    expect_refused(ARGV("timeout", "-s", "KILL", "10", "printenv"), NULL);
    expect_refused(ARGV("nohup", "env"), NULL);
    expect_refused(ARGV("exec", "env"), NULL);
    expect_refused(ARGV("xargs", "-0", "printenv"), NULL);
    expect_refused(ARGV("sudo", "-i", "env"), NULL);
    expect_refused(ARGV("sudo", "-E", "-u", "agent", "--", "printenv", "-0"), NULL);
    expect_allowed(ARGV("infisical", "run", "--", "make"));
    expect_allowed(ARGV("timeout", "10", "make"));
    expect_allowed(ARGV("command", "-v", "env"));
    expect_allowed(ARGV("nice", "-n", "5", "make", "-j2"));
}

static void test_guard_shell_strings(void **state)
{
    (void)state;
    shell_refused("env");
    shell_refused("set");
    shell_refused("export -p");
    shell_refused("  printenv  ");
    shell_refused("echo hi; env");
    shell_refused("make && env | grep KEY");
    shell_refused("true || printenv >/tmp/x");
    shell_refused("(env)");
    shell_refused("{ set; }");
    shell_refused("if true; then env; fi");
    shell_refused("echo $(env)");
    shell_refused("echo \"$(printenv)\"");
    shell_refused("echo `env`");
    shell_refused("diff <(env) /dev/null");
    shell_refused("FOO=1 env");
    shell_refused("e\"n\"v");
    shell_refused("'printenv'");
    shell_refused("eval env");
    shell_refused("eval 'set'");
    shell_refused("bash -c env");
    shell_refused("sh -c 'sh -c \"printenv\"'");
    shell_refused("exec env 2>&1");
    shell_refused("env\n");
    shell_refused("x=1\nexport");
    expect_refused(ARGV("bash", "-c", "env"), NULL);
    expect_refused(ARGV("dash", "-ec", "set"), NULL);
    expect_refused(ARGV("bash", "-o", "pipefail", "-c", "env | sort"), NULL);
    expect_refused(ARGV("bash", "--norc", "-c", "printenv"), NULL);
    expect_refused(ARGV("zsh", "-c", "export"), NULL);
    shell_allowed("echo \"$API_KEY\"");
    shell_allowed("test \"$KEY\" = \"$expected\"");
    shell_allowed("make test && echo env set");
    shell_allowed("echo 'env; set'");
    shell_allowed("printenv HOME");
    shell_allowed("set -euo pipefail; make");
    shell_allowed("export PATH=/x:$PATH; make");
    shell_allowed("# env\nmake");
    shell_allowed("echo environment > /tmp/env");
    shell_allowed("cd /proc && ls");
    expect_allowed(ARGV("bash", "script.sh"));
    expect_allowed(ARGV("sh"));
}

static void test_guard_proc_environ(void **state)
{
    (void)state;
    expect_refused(ARGV("cat", "/proc/self/environ"), "/proc");
    expect_refused(ARGV("cat", "/proc/1/environ"), NULL);
    expect_refused(ARGV("strings", "/proc/self/task/7/environ"), NULL);
    expect_refused(ARGV("cat", "/proc/self/env*"), NULL);
    expect_refused(ARGV("cat", "/proc/*/e?viron"), NULL);
    expect_refused(ARGV("python3", "-c", "print(open('/proc/self/environ').read())"), NULL);
    shell_refused("tr '\\0' '\\n' < /proc/self/environ");
    shell_refused("xargs -0 -n1 </proc/$$/environ");
    shell_refused("cat /proc/\"self\"/environ");
    expect_allowed(ARGV("cat", "/proc/cpuinfo"));
    expect_allowed(ARGV("grep", "environ", "/proc/cpuinfo"));
    expect_allowed(ARGV("ls", "/proc/self/e*x"));
}

static void test_guard_nesting_and_empty(void **state)
{
    sbx_error_t *err = NULL;
    char script[4096] = "env";

    (void)state;
    assert_int_equal(sbx_cred_guard_check(NULL, &err), 0);
    assert_int_equal(sbx_cred_guard_check(ARGV(NULL), &err), 0);
    assert_int_equal(sbx_cred_guard_check_shell("", &err), 0);
    assert_int_equal(sbx_cred_guard_check_shell("\"unclosed", &err), 0);
    assert_int_equal(sbx_cred_guard_check_shell("echo $(", &err), 0);
    assert_int_equal(sbx_cred_guard_check_shell("echo `", &err), 0);
    assert_null(err);
    /* sh -c "sh -c ..." twenty levels deep: refused, never guessed */
    for (int i = 0; i < 20; i++) {
        char tmp[4096];

        snprintf(tmp, sizeof(tmp), "sh -c $(%.4000s)", script);
        strcpy(script, tmp);
    }
    assert_int_equal(sbx_cred_guard_check_shell(script, &err), -1);
    assert_non_null(strstr(err->msg, "nested too deeply"));
    sbx_error_free(&err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_guard_env_printenv), cmocka_unit_test(test_guard_builtins),
        cmocka_unit_test(test_guard_wrappers),     cmocka_unit_test(test_guard_shell_strings),
        cmocka_unit_test(test_guard_proc_environ), cmocka_unit_test(test_guard_nesting_and_empty),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
