-- part: slots
-- expect: instruction limit reached
while true do
  pcall(function() while true do end end)
end
return { class = "light" }
