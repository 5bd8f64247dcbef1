-- part: limits
-- expect: :3: result: unknown key 'cpu'
return { cpu = 2 }
