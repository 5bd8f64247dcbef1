-- part: limits
-- expect: :3: attempt to call a nil value (field 'randomseed')
math.randomseed(42)
return {}
