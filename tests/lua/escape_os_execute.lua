-- part: limits
-- expect: :3: undefined global 'os'
os.execute("touch /tmp/sbx-policy-pwned")
return {}
