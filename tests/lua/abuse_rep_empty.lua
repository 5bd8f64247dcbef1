-- part: limits
-- expect: :4: instruction limit reached
local s = string.rep("", math.maxinteger)
while #s == 0 do end
return {}
