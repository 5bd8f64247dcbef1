-- part: limits
-- expect: instruction limit reached
local x <close> = setmetatable({}, { __close = function() while true do end end })
while true do end
return {}
