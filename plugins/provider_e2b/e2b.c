/* e2b.c - provider_e2b: deferred.
 *
 * ADR 0287 decision 6: the microVM tier waits until untrusted third-party
 * code must run outside 0154's limits; when revived, hosted Firecracker (E2B)
 * is the first choice. This plugin loads, says so, and every call fails.
 */
#include "sbx/sbx_stub.h"

SBX_STUB_PROVIDER("provider_e2b", "0.1.0", SBX_PLUGIN_DEFERRED,
                  "deferred: the microVM tier (hosted Firecracker, E2B) waits until "
                  "untrusted third-party code must run (ADR 0287 decision 6)")
