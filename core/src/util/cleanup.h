/* cleanup.h - scope-bound cleanup (GCC/Clang cleanup attribute), crun style:
 * the SDK helper library's (sbx/sbx_util.h), shared with every plugin. */
#ifndef SBX_UTIL_CLEANUP_H
#define SBX_UTIL_CLEANUP_H

#include "sbx/sbx_util.h"

#endif
