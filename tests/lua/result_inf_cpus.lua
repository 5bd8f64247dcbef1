-- part: limits
-- expect: :3: result: 'cpus' = inf is out of range
return { cpus = math.huge }
