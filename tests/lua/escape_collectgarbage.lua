-- part: limits
-- expect: :3: undefined global 'collectgarbage'
collectgarbage("stop")
return {}
