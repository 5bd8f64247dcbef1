-- part: limits
-- expect: limit reached
for i = 1, 1e9 do
  local s = ("x"):rep(100000)
end
return {}
