-- part: limits
-- expect: :4: unexpected symbol near <eof>
return {
