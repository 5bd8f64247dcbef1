-- limits_test.lua: ADR 0287 decision 7 (run with `sbx policy test`).

local function ci(argv, extra)
  local job = { id = "t", task = "t", pool = "ci", argv = argv }
  for k, v in pairs(extra or {}) do
    job[k] = v
  end
  return job
end

test("ADR defaults: 2 vCPU, 8 GB, 40 GB disk, 60 min idle, 8 h max", function()
  local d = decide(ci({ "encore", "test" }))
  eq(d.limits.cpus, 2)
  eq(d.limits.memory, 8 * GiB)
  eq(d.limits.disk, 40 * GiB)
  eq(d.limits.idle, 60 * 60)
  eq(d.limits.max, 8 * 60 * 60)
  eq(d.decided_by.limits, "policies/limits.lua")
end)

test("the same limits for the agent pool", function()
  local d = decide({ pool = "agent", argv = { "bash" } })
  eq(d.limits.cpus, 2)
  eq(d.limits.memory, 8 * GiB)
  eq(d.limits.max, 8 * 60 * 60)
end)

test("a job may ask for less", function()
  local d = decide(ci({ "npm", "ci" }, { requested = { cpus = 1, memory = "2G", max = "1h" } }))
  eq(d.limits.cpus, 1)
  eq(d.limits.memory, 2 * GiB)
  eq(d.limits.max, 3600)
  eq(d.limits.disk, 40 * GiB)
end)

test("a job never gets more than the ADR gives", function()
  local d = decide(ci({ "npm", "ci" }, { requested = { cpus = 8, memory = "64G", idle = "10h" } }))
  eq(d.limits.cpus, 2)
  eq(d.limits.memory, 8 * GiB)
  eq(d.limits.idle, 3600)
end)

test("pids come from the configured cap unless the job asks for fewer", function()
  local d = decide(ci({ "npm", "ci" }, { requested = { pids = 256 } }))
  eq(d.limits.pids, 256)
end)
