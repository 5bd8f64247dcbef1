-- part: limits
-- expect: :4: attempt to index a boolean value
local mt = getmetatable("")
mt.__index.upper = nil
return {}
