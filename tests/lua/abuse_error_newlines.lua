-- part: limits
-- expect: :3: first line second line
error("first line\nsecond line")
return {}
