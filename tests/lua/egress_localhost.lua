-- part: egress
-- expect: at least two labels
return { allow = { "localhost" } }
