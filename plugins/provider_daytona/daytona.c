/* daytona.c - provider_daytona: an honest stub.
 *
 * ADR 0287 decision 3: Daytona is the managed fallback at about 30 agents.
 * Until then this plugin loads, says so, and every call fails with that
 * reason. docs/providers.md lists what a full driver would map.
 */
#include "sbx/sbx_stub.h"

SBX_STUB_PROVIDER("provider_daytona", "0.1.0", SBX_PLUGIN_STUB,
                  "stub: Daytona is the managed fallback at about 30 agents (ADR 0287 "
                  "decision 3); no driver is built yet")
