-- part: slots
-- expect: result: slots.lua must return a table, got nil
local x = 1
