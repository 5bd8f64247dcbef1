-- part: limits
-- expect: :3: resulting string too large
local s = string.rep("x", 1 << 30)
return {}
