-- part: limits
-- expect: :4: result: unknown key '__index'
-- values behind __index are never read: only raw keys count
return setmetatable({ __index = 1 }, { __index = { cpus = 1000 } })
