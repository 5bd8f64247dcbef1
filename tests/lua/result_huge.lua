-- part: limits
-- expect: :3: result: 'disk' must be a whole number
return { disk = 1e300 }
