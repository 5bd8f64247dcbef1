-- part: limits
-- expect: :4: table.insert: more than 1000000 elements
local t = setmetatable({}, { __len = function() return 1e12 end })
table.insert(t, 1, "x")
return {}
