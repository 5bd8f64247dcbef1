-- part: limits
-- expect: :3: instruction limit reached
while true do end
return {}
