-- part: limits
-- expect: :4: attempt to call a nil value (method 'dump')
local f = function() end
local s = ("x"):dump(f)
return {}
