/* infisical.c - cred_infisical: not built yet; its own issue completes it. */
#include "sbx/sbx_stub.h"

SBX_STUB_CREDENTIAL("cred_infisical", "0.1.0", SBX_PLUGIN_STUB, "not built yet")
