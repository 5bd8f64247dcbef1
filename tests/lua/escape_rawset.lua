-- part: limits
-- expect: :3: undefined global 'rawset'
rawset(math, "pi", 3)
return {}
