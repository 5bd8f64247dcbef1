-- part: limits
-- expect: :3: result: 'pids' = 9223372036854775807 is out of range
return { pids = math.maxinteger }
