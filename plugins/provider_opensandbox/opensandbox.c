/* opensandbox.c - provider_opensandbox: not built yet; its own issue completes it. */
#include "sbx/sbx_stub.h"

SBX_STUB_PROVIDER("provider_opensandbox", "0.1.0", SBX_PLUGIN_STUB, "not built yet")
