-- part: limits
-- expect: :3: result: 'memory' is NaN
return { memory = 0/0 }
