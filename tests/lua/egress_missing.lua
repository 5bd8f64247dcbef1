-- part: egress
-- expect: 'allow' is missing
return {}
