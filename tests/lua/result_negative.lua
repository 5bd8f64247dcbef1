-- part: limits
-- expect: :3: result: 'memory' = -1 is out of range
return { memory = -1 }
