-- part: limits
-- expect: stack overflow|memory limit reached|time limit reached
local function f(n) return f(n + 1) + 1 end
f(1)
return {}
