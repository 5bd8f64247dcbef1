-- part: limits
-- expect: :3: result: 'cpus' = 0 is out of range
return { cpus = 0 }
