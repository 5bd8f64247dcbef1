-- part: limits
-- expect: :3: attempt to modify a read-only table
string.upper = function() return "pwned" end
return {}
