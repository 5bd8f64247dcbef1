-- part: egress
-- expect: IP literals are not host rules
return { allow = { "169.254.169.254" } }
