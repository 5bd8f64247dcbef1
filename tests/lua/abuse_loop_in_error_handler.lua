-- part: egress
-- expect: instruction limit reached
xpcall(function() while true do end end, function() while true do end end)
return { allow = {} }
