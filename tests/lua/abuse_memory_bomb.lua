-- part: limits
-- expect: :6: memory limit reached|:6: time limit reached
local t = {}
local s = ("x"):rep(1000)
for i = 1, 1e9 do
  t[i] = s .. i
end
return {}
