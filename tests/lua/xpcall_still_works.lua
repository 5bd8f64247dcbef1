-- part: limits
-- expect: :4: handled: 
local ok, err = xpcall(function() error("boom") end, function(e) return "handled: " .. e end)
error(err, 0)
return {}
