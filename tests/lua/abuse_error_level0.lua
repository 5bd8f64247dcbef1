-- part: limits
-- expect: :3: no position
error("no position", 0)
return {}
