-- part: limits
-- expect: :5: attempt to modify a read-only table
local iter, t = pairs(job.labels)
-- the second value is the proxy itself, never the real table
t.injected = "x"
return {}
