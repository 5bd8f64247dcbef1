-- part: limits
-- expect: :4: attempt to index a boolean value
local mt = getmetatable(_ENV)
local allow = mt.__index
return {}
