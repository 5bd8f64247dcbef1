-- part: limits
-- expect: limit reached
local s = ("x"):rep(1 << 19)
while true do local t = s .. "y" end
return {}
