-- part: limits
-- expect: :4: not a read-only table
local iter = pairs(job)
iter("", nil)
return {}
