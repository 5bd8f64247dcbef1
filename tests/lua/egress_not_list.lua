-- part: egress
-- expect: 'allow' must be a list
return { allow = { a = "example.com" } }
