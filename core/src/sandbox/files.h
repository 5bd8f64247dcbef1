/* files.h - a running task's files and its pause/resume (docs/tasks.md, "Files",
 * "Pause and resume"), for the keeper, the runner's API and the MCP tools alike.
 * Paths are absolute paths inside the sandbox, resolved there by the provider
 * (never on the host). */
#ifndef SBX_SANDBOX_FILES_H
#define SBX_SANDBOX_FILES_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox/task.h"

/* The bounds (docs/tasks.md, "Files"). */
#define SBX_FILES_CP_MAX (256LL << 20) /* one `sbx cp` archive, either way */
#define SBX_FILES_ONE_MAX (1LL << 20)  /* one file read or written by the API or MCP */
/* an archive the runner's API sends (`sbx cp` out through the runner): it is held in the
 * runner's memory until the client has read it */
#define SBX_FILES_API_ARCHIVE_MAX (64LL << 20)
#define SBX_FILES_LIST_MAX 10000 /* entries `sbx task files` lists */
#define SBX_FILES_PATH_MAX 4095

/* Error codes of this module (sbx_error_t.code), for the API's statuses. */
enum {
    SBX_FILES_E_TOOBIG = SBX_E_GENERIC + 3001, /* over a bound above: 413 */
    SBX_FILES_E_PAUSED,                        /* the task is paused: 409 */
    SBX_FILES_E_NOTFILE,     /* not a regular file (a directory, a symlink): 400 */
    SBX_FILES_E_UNSUPPORTED, /* the provider has no such op: 501 */
};

/* A path the API, MCP or CLI was given: absolute, at most SBX_FILES_PATH_MAX bytes,
 * no control characters. -1 with err naming `what`. */
int sbx_files_path_ok(const char *path, const char *what, sbx_error_t **err);

/* Freezes every process of the task's sandbox (provider op pause); the record's
 * state shows "paused" and execs are refused until sbx_task_resume. Pausing a
 * paused task, or resuming a running one, is a no-op. */
int sbx_task_pause(struct sbx_task *t, int to_disk, sbx_error_t **err);
int sbx_task_resume(struct sbx_task *t, sbx_error_t **err);
/* 1 while paused. */
int sbx_task_paused(struct sbx_task *t);
/* For sbx_task_exec (task_life.c): -1 with an error naming the task while it is
 * paused. Call with t->mu held. */
int sbx_task_paused_refuse(struct sbx_task *t, sbx_error_t **err);
/* For sbx_task_stop: a paused sandbox is thawed so that its commands can be
 * cancelled and it can be removed. */
void sbx_task_thaw_for_stop(struct sbx_task *t);

/* A tar archive of path streamed to sink, at most max bytes (else
 * SBX_FILES_E_TOOBIG naming the bound). */
int sbx_task_files_get(struct sbx_task *t, const char *path, int64_t max,
                       int (*sink)(void *ud, const char *data, size_t len), void *ud,
                       sbx_error_t **err);
/* Extracts tar into the sandbox's existing directory dir. */
int sbx_task_files_put(struct sbx_task *t, const char *dir, const char *tar, size_t len,
                       sbx_error_t **err);
/* (added) Extracts the tar archive read from source into dir, streamed to the provider
 * (files_put_stream; a provider without it gets the archive whole). Counted while it
 * flows: past SBX_FILES_CP_MAX the copy stops with SBX_FILES_E_TOOBIG; a source that
 * fails (non-zero) stops it with SBX_E_CANCELLED (the source keeps its reason). *bytes:
 * the archive's bytes read. */
int sbx_task_files_put_stream(struct sbx_task *t, const char *dir,
                              int (*source)(void *ud, char *buf, size_t cap, size_t *n), void *ud,
                              int64_t *bytes, sbx_error_t **err);
/* Whether path exists in the sandbox and is a directory: 1 directory, 0 another
 * kind, -1 with err (SBX_E_NOTFOUND when it does not exist). */
int sbx_task_files_is_dir(struct sbx_task *t, const char *path, sbx_error_t **err);
/* One regular file's content (at most max bytes); *data malloc'd. A directory or a
 * symlink is SBX_FILES_E_NOTFILE. */
int sbx_task_file_read(struct sbx_task *t, const char *path, int64_t max, char **data, size_t *len,
                       sbx_error_t **err);
/* Writes one regular file (its directory must exist), mode 0644. */
int sbx_task_file_write(struct sbx_task *t, const char *path, const char *data, size_t len,
                        sbx_error_t **err);
/* Lists path (a directory's entries, or the file itself), run by `find` inside the
 * sandbox: {"path", "entries": [{"name","type","mode","size","mtime"}], "truncated"}. */
json_t *sbx_task_files_list(struct sbx_task *t, const char *path, sbx_error_t **err);

#endif
