-- part: limits
-- expect: :3: table.move: more than 1000000 elements
table.move({}, 1, 1e12, 2)
return {}
