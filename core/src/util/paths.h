/* paths.h - files that ship with sbx: helper programs (libexec) and data. */
#ifndef SBX_UTIL_PATHS_H
#define SBX_UTIL_PATHS_H

/* The directory holding the running sbx binary (caller frees), or NULL. */
char *sbx_exe_dir(void);
/* A helper program: $SBX_LIBEXEC_DIR/NAME, else <exe dir>/libexec/NAME, else
 * the installed libexec/sbx/NAME. Returns NULL when none is executable. */
char *sbx_libexec_path(const char *name);

#endif
