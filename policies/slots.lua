-- slots.lua: the slot class of one job (ADR 0287, binding lesson 2).
--
-- In:  job, config (read-only; see limits.lua)
-- Out: { class = "heavy" | "light", reason = "..." }
--
-- Heavy jobs take the box's exclusive slot: `encore test`, end-to-end tests
-- and the full `verify` (and a whole test suite). Light jobs run in parallel
-- slots: install, lint, typecheck and single test files. The label
-- `sbx.class` ("heavy" or "light") overrides the rules. Anything else is light.

local LABEL = "sbx.class"

local override = job.labels[LABEL]
if override ~= nil then
  if override ~= "heavy" and override ~= "light" then
    error("label " .. LABEL .. " must be \"heavy\" or \"light\", got \"" .. override .. "\"")
  end
  return { class = override, reason = "label " .. LABEL }
end

local function heavy(why)
  return { class = "heavy", reason = why }
end

local function light(why)
  return { class = "light", reason = why }
end

-- The words of the command, without wrappers such as `infisical run --`.
local function split(s)
  local out = {}
  for w in s:gmatch("%S+") do
    out[#out + 1] = w
  end
  return out
end

local function drop(list, n)
  local out = {}
  for i = n + 1, #list do
    out[#out + 1] = list[i]
  end
  return out
end

local function after_dashdash(list)
  for i, w in ipairs(list) do
    if w == "--" then
      return drop(list, i)
    end
  end
  return drop(list, 2)
end

local function basename(w)
  if w:find("/", 1, true) then
    return w:match("([^/]*)$")
  end
  return w
end

-- job.argv is read as it is; a copy is made only to strip a wrapper.
local args = job.argv

for _ = 1, 8 do
  local cmd = args[1] and basename(args[1])
  if cmd == "infisical" and args[2] == "run" then
    args = after_dashdash(args)
  elseif cmd == "mise" and (args[2] == "exec" or args[2] == "x") then
    args = after_dashdash(args)
  elseif cmd == "env" then
    local i = 2
    while args[i] and (args[i]:find("=", 1, true) or args[i]:sub(1, 1) == "-") do
      i = i + 1
    end
    args = drop(args, i - 1)
  elseif cmd == "time" or cmd == "nice" or cmd == "nohup" or cmd == "npx" then
    args = drop(args, 1)
  elseif (cmd == "pnpm" or cmd == "yarn") and (args[2] == "exec" or args[2] == "dlx") then
    args = drop(args, 2)
  elseif (cmd == "sh" or cmd == "bash") and args[2] == "-c" and args[3] then
    args = split(args[3])
  else
    break
  end
end

local cmd = args[1] and basename(args[1]) or ""

local function is_test_file(w)
  return w:find("%.test%.[cm]?[jt]sx?$") or w:find("%.spec%.[cm]?[jt]sx?$")
    or w:find("_test%.go$")
end

local function has_test_file(from)
  for i = from, #args do
    if is_test_file(args[i]) then
      return true
    end
  end
  return false
end

-- The package.json script (or make/just target) the command runs, if any.
local script
if cmd == "npm" then
  if args[2] == "run" or args[2] == "run-script" then
    script = args[3]
  elseif args[2] == "test" or args[2] == "t" then
    script = "test"
  end
elseif cmd == "pnpm" or cmd == "yarn" or cmd == "bun" then
  if args[2] == "run" then
    script = args[3]
  else
    script = args[2]
  end
elseif cmd == "make" or cmd == "just" then
  script = args[2]
end

local function is_install(sub)
  if cmd == "npm" then
    return sub == "ci" or sub == "install" or sub == "i" or sub == "add"
  elseif cmd == "pnpm" then
    return sub == "install" or sub == "i" or sub == "add" or sub == "fetch"
  elseif cmd == "yarn" then
    return sub == nil or sub == "install" or sub == "add"
  elseif cmd == "bun" then
    return sub == "install" or sub == "i" or sub == "add"
  end
  return false
end
if is_install(args[2]) then
  return light("install")
end

if cmd == "encore" and args[2] == "test" then
  if has_test_file(3) then
    return light("encore test of single test files")
  end
  return heavy("encore test")
end

local function mentions_e2e(w)
  return w:find("e2e", 1, true) or w:find("end-to-end", 1, true)
end
if cmd == "playwright" or cmd == "cypress" or (script and mentions_e2e(script)) then
  return heavy("end-to-end tests")
end
for i = 1, #args do
  if mentions_e2e(args[i]) then
    return heavy("end-to-end tests")
  end
end

if script == "verify" or cmd == "verify" then
  return heavy("full verify")
end

if script == "lint" or (script and script:sub(1, 5) == "lint:") or cmd == "eslint"
    or cmd == "biome" or cmd == "oxlint" or cmd == "prettier" then
  return light("lint")
end

if script == "typecheck" or script == "type-check" or script == "check-types"
    or script == "tsc" or cmd == "tsc" or cmd == "vue-tsc" then
  return light("typecheck")
end

if cmd == "vitest" or cmd == "jest" or cmd == "mocha" or script == "test" or (script and script:sub(1, 5) == "test:")
    or (cmd == "node" and args[2] == "--test") then
  if has_test_file(2) then
    return light("single test files")
  end
  return heavy("whole test suite")
end

return light("default: not a heavy job")
