-- part: egress
-- expect: without holes
return { allow = { [1] = "example.com", [3] = "example.org" } }
