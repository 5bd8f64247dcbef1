-- part: egress
-- expect: ports must be integers 1..65535
return { allow = { { host = "example.com", ports = { 0 } } } }
