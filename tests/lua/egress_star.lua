-- part: egress
-- expect: :3: result: egress rule 1 '*'
return { allow = { "*" } }
