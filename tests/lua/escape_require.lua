-- part: slots
-- expect: :3: undefined global 'require'
local ffi = require("ffi")
return { class = "light" }
