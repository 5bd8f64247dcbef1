-- part: egress
-- expect: egress rule 1: 'opaque' must be a boolean, got string
return { allow = { { host = "git.example.com", ports = { 22 }, opaque = "yes" } } }
