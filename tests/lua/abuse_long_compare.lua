-- part: limits
-- expect: limit reached
local a = ("x"):rep(1 << 19)
local b = a .. "y"
while a < b do end
return {}
