-- part: limits
-- expect: :5: pattern too complex
local hay = ("a"):rep(1 << 19)
local needle = ("a"):rep(1 << 18) .. "b"
local hit = hay:find(needle, 1, true)
return {}
