-- part: egress
-- expect: ports must be numbers from 1 to 65535
return { allow = { "example.com:99999" } }
