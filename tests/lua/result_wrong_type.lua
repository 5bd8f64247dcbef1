-- part: limits
-- expect: :3: result: 'cpus': bad CPU count 'lots'
return { cpus = "lots" }
