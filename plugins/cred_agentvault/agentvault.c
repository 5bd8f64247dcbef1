/* agentvault.c - cred_agentvault: deferred.
 *
 * ADR 0287 decision 9: Infisical Agent Vault stays Deferred under ADR 0267;
 * the STA-307 spike evaluates it and a new ADR revives it only if it proves
 * out. A full plugin would open one Agent Vault session per task through its
 * proxy (see docs/credentials.md). Every call fails with this reason.
 */
#include "sbx/sbx_stub.h"

SBX_STUB_CREDENTIAL("cred_agentvault", "0.1.0", SBX_PLUGIN_DEFERRED,
                    "deferred: Infisical Agent Vault stays deferred under ADR 0267; the "
                    "STA-307 spike evaluates it and only a new ADR revives it")
