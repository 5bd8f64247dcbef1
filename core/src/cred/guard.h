/* guard.h - the environment guard for tasks that hold credentials.
 *
 * When a task has a credential lease, the core calls sbx_cred_guard_check()
 * on every command before it is executed in the sandbox. Commands that would
 * dump the whole environment (and so every secret value at once) are refused:
 *
 *   env / printenv with no operands (also only options: env -0, printenv
 *   --null, env -u X, any path: /usr/bin/env, busybox env), export with no
 *   operands or -p, set with no operands, declare/typeset with only options,
 *   infisical run -- env (and --command), wrappers (command, exec, nohup,
 *   sudo, timeout, nice, xargs, stdbuf, setsid, time) around any of these,
 *   shells with -c (sh, bash, dash, zsh, ksh, ash, mksh, busybox sh): the
 *   string is split into simple commands (; & | && || newlines, subshells,
 *   $(...), `...`, <(...), eval) and each is checked the same way;
 *   any word or redirection naming /proc/<something>/environ (also globbed,
 *   such as /proc/self/env*).
 *
 * It cannot catch everything: an agent's own shell can always read its own
 * environment (a script file, `$SHELL` with no -c, an interpreter such as
 * python -c 'import os; print(os.environ)', cd /proc/self && cat environ).
 * The real defence is that credentials are short-lived and narrow; the
 * guard stops the obvious and the accidental. See docs/credentials.md.
 */
#ifndef SBX_CRED_GUARD_H
#define SBX_CRED_GUARD_H

#include "util/error.h"

/* Returns 0 when argv (NULL-terminated) may run in a task with credentials,
 * -1 with *err set (code SBX_E_POLICY, one line naming the refused command)
 * when it would dump the environment. A NULL or empty argv is allowed (there
 * is nothing to run). */
int sbx_cred_guard_check(const char *const *argv, sbx_error_t **err);

/* The same for one shell command string (what sh -c would run). */
int sbx_cred_guard_check_shell(const char *script, sbx_error_t **err);

#endif
