-- part: egress
-- expect: only as a leading
return { allow = { "a*.example.com" } }
