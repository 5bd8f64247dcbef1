-- part: limits
-- expect: :3: undefined global 'dofile'
dofile("/etc/passwd")
return {}
