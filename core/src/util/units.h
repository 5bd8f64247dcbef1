/* units.h - sizes, CPUs and durations as docs/architecture.md fixes them.
 * Sizes: binary suffixes K, M, G, T (also Ki/KiB...); "8G" = 8589934592.
 * CPUs: decimals ("2.0", "0.5"). Durations: s, m, h, d, combinable ("1h30m");
 * a bare number is seconds. */
#ifndef SBX_UTIL_UNITS_H
#define SBX_UTIL_UNITS_H

#include <stdint.h>

#include "util/error.h"

int sbx_size_parse(const char *s, int64_t *out, sbx_error_t **err);
int sbx_cpus_parse(const char *s, double *out, sbx_error_t **err);
int sbx_duration_parse(const char *s, int64_t *out, sbx_error_t **err);
/* Formats bytes as the largest exact binary unit ("8G", "1536M", "100"). */
void sbx_size_format(int64_t bytes, char *buf, unsigned long len);
void sbx_duration_format(int64_t secs, char *buf, unsigned long len);

#endif
