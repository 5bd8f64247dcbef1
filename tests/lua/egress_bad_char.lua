-- part: egress
-- expect: invalid character '_'
return { allow = { "ex_ample.com" } }
