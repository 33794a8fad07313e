# Prints on stdout, on stderr, and something that looks like env -0
# output, none of which may be taken for the environment.
echo ":: initializing ..."
printf 'FAKE=from_stdout\0'
echo "warning: just chatter" >&2
export CHATTY=yes
