/* agentvault.c - cred_agentvault: deferred.
 *
 * ADR 0287 decision 9: Infisical Agent Vault stays Deferred under ADR 0267;
 * the STA-307 spike evaluates it and a new ADR revives it only if it proves
 * out. Every call fails with this reason. docs/credentials.md ("Agent Vault")
 * has the full design; in short, the full plugin would:
 *
 *   init     read the same machine-identity options as cred_infisical (url,
 *            client_id_env, client_secret_env or client_secret_file) plus
 *            `proxy` (the enrolled Agent Vault proxy, port 17323 by default),
 *            `access_bundle` (exactly one bundle per session; a template
 *            of {client} and {pool}, the scope's client and pool of plugin
 *            ABI 1.4, default "{client}-{pool}", so each client's sessions
 *            carry only its own bundle) and `ttl` (at least 1m; the task's
 *            limits.max by default).
 *   acquire  log in (Universal Auth), then
 *            POST /api/v1/agent-vault/sessions {"accessBundles":[B],"ttl":T}
 *            and revoke the login token at once (a session does not depend on
 *            the token that created it). The lease id is the session id (not
 *            a secret); the lease values are not API credentials but the
 *            session's proxy settings: HTTPS_PROXY/HTTP_PROXY =
 *            http://x-agent-vault:<session token>@<proxy>:17323 and the
 *            proxy CA for SSL_CERT_FILE, NODE_EXTRA_CA_CERTS, ... The sandbox
 *            never holds the real credential: the proxy attaches it to
 *            requests for the bundle's hosts.
 *   renew    nothing: a session lives until its ttl.
 *   revoke   POST /api/v1/agent-vault/sessions/<id>/revoke, which needs only
 *            the id and a fresh login, so a lease left by a crashed sbx CAN be
 *            revoked from its record (unlike a cred_infisical token).
 *
 * Open questions the spike must answer: the session proxy and sbx's own
 * egress proxy must chain (the sandbox has one way out); the Agent Vault
 * proxy terminates TLS and cuts streams at 30 min; HTTP/2-only clients and
 * WebSockets do not work through it.
 *
 * Built against plugin ABI 1.4 (SBX_STUB_CREDENTIAL takes the header's
 * minor): its acquire receives the scope's client and pool, and fails with
 * the reason below like every other call.
 */
#include "sbx/sbx_stub.h"

SBX_STUB_CREDENTIAL("cred_agentvault", "0.1.0", SBX_PLUGIN_DEFERRED,
                    "deferred: Infisical Agent Vault stays deferred under ADR 0267; the "
                    "STA-307 spike evaluates it and only a new ADR revives it")
