-- part: slots
-- expect: :3: result: 'class' must be "heavy" or "light", got "medium"
return { class = "medium" }
