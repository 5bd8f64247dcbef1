-- part: limits
-- expect: :3: resulting string too large
local s = ("ab"):rep(1 << 40, ",")
return {}
