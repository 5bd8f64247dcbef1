-- part: limits
-- expect: result: keys must be strings, got a number key
return { 2 }
