/* sbx_error.h - the error type shared by the core and plugins (SDK).
 *
 * Contract (crun's, see docs/error_handling.md):
 *   - a fallible function takes `sbx_error_t **err` as its LAST parameter and
 *     returns int (0 ok, <0 failure) or a pointer (NULL on failure);
 *   - on success *err is untouched; on failure *err points to a heap error;
 *   - every error is either propagated or freed, never both.
 * Plugins create errors through host->error_set() so the core owns the memory.
 */
#ifndef SBX_SDK_ERROR_H
#define SBX_SDK_ERROR_H

struct sbx_error {
    int code;  /* errno value or an enum sbx_errcode */
    char *msg; /* one line, no trailing newline */
};

typedef struct sbx_error sbx_error_t;

/* Error codes beyond errno. Large values so they never collide with errno. */
enum sbx_errcode {
    SBX_E_GENERIC = 10000,
    SBX_E_CONFIG,    /* configuration file or option is wrong (exit 2) */
    SBX_E_USAGE,     /* command-line usage (exit 2) */
    SBX_E_PLUGIN,    /* a plugin was refused */
    SBX_E_STUB,      /* the plugin is a stub or deferred: the call cannot work */
    SBX_E_ENGINE,    /* the sandbox engine or remote service failed */
    SBX_E_POLICY,    /* policy refused the job or failed (fail closed) */
    SBX_E_NOTFOUND,  /* a named thing does not exist */
    SBX_E_CANCELLED, /* the operation was cancelled */
    SBX_E_NOEXEC,    /* the command could not be executed (126) */
    SBX_E_NOCMD,     /* the command was not found (127) */
    SBX_E_TIMEOUT,   /* a limit of time was reached */
    SBX_E_PROTOCOL,  /* a remote reply was malformed */
};

#endif
