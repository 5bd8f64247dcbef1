-- part: limits
-- expect: :3: attempt to modify a read-only table
job.pool = "agent"
return {}
