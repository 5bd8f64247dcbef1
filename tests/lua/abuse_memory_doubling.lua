-- part: limits
-- expect: :5: memory limit reached|:5: time limit reached
local s = "x"
while true do
  s = s .. s
end
return {}
