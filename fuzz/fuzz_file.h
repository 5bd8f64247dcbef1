/* fuzz_file.h - for harnesses of parsers that read a file by path: one private
 * directory per process, the input written to a fixed name in it. */
#ifndef SBX_FUZZ_FILE_H
#define SBX_FUZZ_FILE_H
#include <stddef.h>
#include <stdint.h>

/* The directory (created on first use, removed at exit). */
const char *fuzz_dir(void);
/* Writes data to fuzz_dir()/rel (rel's parent directories are created) and
 * returns the full path (static storage, valid until the next call). */
const char *fuzz_write_file(const char *rel, const uint8_t *data, size_t size);
/* Removes fuzz_dir()/rel when present. */
void fuzz_remove_file(const char *rel);
#endif
