-- part: slots
-- expect: 'class' is missing
return { reason = "forgot" }
