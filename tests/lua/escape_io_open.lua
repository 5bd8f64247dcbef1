-- part: egress
-- expect: :3: undefined global 'io'
local f = io.open("/etc/passwd")
return { allow = {} }
