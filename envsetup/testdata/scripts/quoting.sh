# Values a shell could misread: quotes, $, backquotes, backslashes,
# newlines, an empty value, = inside.
export Q_SINGLE="it's"
export Q_DOUBLE='say "hi"'
export Q_DOLLAR='$HOME and ${PATH}'
export Q_BACKQUOTE='`touch PWNED`'
export Q_BACKSLASH='a\b\\c'
export Q_NEWLINE='line one
line two'
export Q_EMPTY=
export Q_EQUALS='a=b=c'
