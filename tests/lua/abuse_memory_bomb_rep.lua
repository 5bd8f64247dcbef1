-- part: limits
-- expect: :5: memory limit reached|:5: time limit reached
local t = {}
for i = 1, 1e9 do
  t[i] = ("x"):rep(1000) .. i
end
return {}
