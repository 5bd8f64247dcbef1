-- part: limits
-- expect: :3: cannot change a protected metatable
setmetatable(_ENV, nil)
return {}
