-- part: limits
-- expect: :3: undefined global 'load'
local f = load("\27Lua")
return {}
