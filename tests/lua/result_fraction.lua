-- part: limits
-- expect: :3: result: 'pids' must be a whole number, got 1.5
return { pids = 1.5 }
