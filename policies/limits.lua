-- limits.lua: the limits of one job's sandbox (ADR 0287, decision 7).
--
-- In:  job    (read-only) id, task, pool, argv, workdir, repository,
--             provider, labels, requested {cpus, memory, disk, pids, idle, max}
--      config (read-only) caps {cpus, memory, disk, pids, idle, max},
--             registries, worktree_protect (the protected paths, globs)
-- Out: { cpus = N, memory = B, disk = B, pids = N, idle = S, max = S,
--        reason = "..." }   (bytes and seconds, or "8G" / "60m" strings)
-- A limit left out gets the configured cap. The core clamps every value to
-- the caps in config (`limits`, and the pool's cpus and memory): a policy can
-- narrow them, never exceed them. See docs/policy.md.

-- Decision 7: 2 vCPU, 8 GB memory, 40 GB disk, stop after 60 idle minutes,
-- at most 8 hours.
local adr = {
  cpus = 2,
  memory = 8 * GiB,
  disk = 40 * GiB,
  idle = 60 * 60,
  max = 8 * 60 * 60,
}

-- A job may ask for less than the ADR gives, never for more.
local narrowed = false
local function narrow(name)
  local want = job.requested[name]
  if want ~= nil and want < adr[name] then
    narrowed = true
    return want
  end
  return adr[name]
end

local limits = {
  cpus = narrow("cpus"),
  memory = narrow("memory"),
  disk = narrow("disk"),
  idle = narrow("idle"),
  max = narrow("max"),
  -- pids is not in the ADR: the configured cap applies unless the job asks for fewer.
  pids = job.requested.pids,
}
if narrowed then
  limits.reason = "ADR 0287 decision 7, narrowed to the job's request"
else
  limits.reason = "ADR 0287 decision 7"
end
return limits
