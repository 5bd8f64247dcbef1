-- egress.lua: the egress allow-list of one job (ADR 0287, decision 8).
--
-- In:  job, config (read-only; see limits.lua). config.registries holds the
--      registry hosts from config `egress.registries` (the npm registry and
--      the container registries: ECR, GHCR, Docker Hub). Registry hosts are
--      never written here.
-- Out: { allow = { RULE, ... }, reason = "..." }
--
-- A RULE is "HOST", "HOST:PORT[,PORT...]" or { host = "HOST", ports = {...} }.
-- The table form may add opaque = true: a tunnel to that host and port may then
-- carry a protocol that is neither TLS nor HTTP (SSH to a Git host); without it the
-- egress proxy refuses such bytes (docs/egress.md). List only the ports that need it:
--   { host = "github.com", ports = { 22 }, opaque = true }
--   "example.com"    exactly that name
--   "*.example.com"  any subdomain of it (a.example.com, a.b.example.com),
--                    not example.com itself: list both when both are needed
-- Names compare case-insensitively and a trailing dot is ignored. Ports
-- default to 80 and 443. IP literals and one-label names are refused.
-- Everything not allowed is denied.
--
-- (added) change(task, request, who): decides `sbx task allow|deny` on a
-- running task (docs/policy.md, "Changing a running task's egress").
--   task    { id, job, pool, provider, allow = { RULE, ... } } (its rules now)
--   request { op = "allow"|"deny", rule = "host:p1,p2", host, ports = {...} }
--   who     { client = "local"|API client name, via = "cli"|"api"|"mcp" }
-- Return { allow = true|false, rule = "NAME", reason = "..." }: NAME is what
-- a refusal names. Without change(), only denies are allowed.

local allow = {
  -- GitHub (git over HTTPS, the API, raw content and release downloads)
  "github.com",
  "*.github.com",
  "*.githubusercontent.com",
  -- Anthropic
  "api.anthropic.com",
  -- Amazon Bedrock, in the sandboxes' region (ADR 0287, decision 14)
  "bedrock.eu-central-1.amazonaws.com",
  "bedrock-runtime.eu-central-1.amazonaws.com",
  -- Infisical, EU instance
  "eu.infisical.com",
  -- Encore
  "encore.dev",
  "*.encore.dev",
  "encore.cloud",
  "*.encore.cloud",
  -- Linear
  "linear.app",
  "*.linear.app",
}

-- The registries come from configuration, never from this script.
for _, host in ipairs(config.registries) do
  allow[#allow + 1] = host
end

function change(task, request, who)
  if request.op == "deny" then
    return { allow = true, rule = "narrowing", reason = "removing access is always allowed" }
  end
  if task.pool == "ci" then
    return { allow = false, rule = "ci-fixed",
             reason = "a CI job's egress is the one decided at its start" }
  end
  if string.sub(request.host, 1, 2) == "*." then
    return { allow = false, rule = "no-runtime-wildcards",
             reason = "a running task may gain single hosts only, not *.domain" }
  end
  return { allow = true, rule = "agent-adds-hosts",
           reason = "an agent task may add a single host while it runs" }
end

return {
  allow = allow,
  reason = "ADR 0287 decision 8 allow-list",
}
