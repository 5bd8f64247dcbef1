-- part: slots
-- expect: :3: pattern too complex
local hit = ("a"):rep(40):find(("a*"):rep(40) .. "b")
return { class = "light" }
