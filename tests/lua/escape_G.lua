-- part: limits
-- expect: :3: undefined global '_G'
local g = _G
return {}
