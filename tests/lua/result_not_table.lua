-- part: limits
-- expect: :3: result: limits.lua must return a table, got string
return "2 cpus"
