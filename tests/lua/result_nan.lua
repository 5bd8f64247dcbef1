-- part: limits
-- expect: :3: result: 'cpus' is NaN
return { cpus = 0/0 }
