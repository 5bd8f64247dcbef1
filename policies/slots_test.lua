-- slots_test.lua: ADR 0287 lesson 2, heavy and light jobs (run with `sbx policy test`).

local function slot(argv, labels, pool)
  return decide({ id = "t", pool = pool or "ci", argv = argv, labels = labels }).slot
end

test("encore test is heavy", function()
  eq(slot({ "encore", "test" }), "heavy")
  eq(slot({ "encore", "test", "./..." }), "heavy")
  eq(slot({ "/usr/local/bin/encore", "test" }), "heavy")
end)

test("encore test in the agent pool is heavy too", function()
  eq(slot({ "encore", "test" }, nil, "agent"), "heavy")
end)

test("wrappers are seen through", function()
  eq(slot({ "infisical", "run", "--env", "dev", "--", "encore", "test" }), "heavy")
  eq(slot({ "bash", "-c", "encore test" }), "heavy")
  eq(slot({ "env", "CI=1", "encore", "test" }), "heavy")
  eq(slot({ "mise", "exec", "--", "npm", "ci" }), "light")
end)

test("end-to-end tests are heavy", function()
  eq(slot({ "pnpm", "test:e2e" }), "heavy")
  eq(slot({ "npm", "run", "e2e" }), "heavy")
  eq(slot({ "npx", "playwright", "test" }), "heavy")
  eq(slot({ "pnpm", "exec", "cypress", "run" }), "heavy")
end)

test("the full verify is heavy", function()
  eq(slot({ "pnpm", "verify" }), "heavy")
  eq(slot({ "npm", "run", "verify" }), "heavy")
  eq(slot({ "make", "verify" }), "heavy")
end)

test("install is light", function()
  eq(slot({ "npm", "ci" }), "light")
  eq(slot({ "npm", "install" }), "light")
  eq(slot({ "pnpm", "install", "--frozen-lockfile" }), "light")
  eq(slot({ "yarn" }), "light")
end)

test("lint is light", function()
  eq(slot({ "pnpm", "lint" }), "light")
  eq(slot({ "npm", "run", "lint:fix" }), "light")
  eq(slot({ "npx", "eslint", "." }), "light")
end)

test("typecheck is light", function()
  eq(slot({ "pnpm", "typecheck" }), "light")
  eq(slot({ "npx", "tsc", "--noEmit" }), "light")
end)

test("single test files are light", function()
  eq(slot({ "npx", "vitest", "run", "src/user.test.ts" }), "light")
  eq(slot({ "encore", "test", "src/user.test.ts" }), "light")
  eq(slot({ "pnpm", "test", "--", "api/auth.spec.tsx" }), "light")
end)

test("a whole test suite is heavy", function()
  eq(slot({ "pnpm", "test" }), "heavy")
  eq(slot({ "npx", "vitest", "run" }), "heavy")
end)

test("the label sbx.class overrides the rules", function()
  eq(slot({ "encore", "test" }, { ["sbx.class"] = "light" }), "light")
  eq(slot({ "npm", "ci" }, { ["sbx.class"] = "heavy" }), "heavy")
end)

test("a bad sbx.class label denies the job", function()
  local msg = denied({ pool = "ci", argv = { "npm", "ci" }, labels = { ["sbx.class"] = "huge" } })
  ok(msg:find("policies/slots.lua:", 1, true), msg)
  ok(msg:find("sbx.class", 1, true), msg)
end)

test("anything else is light, and the script is named", function()
  local d = decide({ pool = "agent", argv = { "bash" } })
  eq(d.slot, "light")
  eq(d.decided_by.slot, "policies/slots.lua")
  eq(decide({ pool = "agent" }).slot, "light")
end)
