/* xalloc.h - allocation that aborts on OOM: the SDK helper library's one
 * family (core/sdk/xalloc.c, sbx/sbx_util.h), shared with every plugin. */
#ifndef SBX_UTIL_XALLOC_H
#define SBX_UTIL_XALLOC_H

#include "sbx/sbx_util.h"

#endif
