# Fails the way a vendor script does: a message on stderr, a non-zero
# return, after setting a variable that must not be applied.
export HALF_DONE=1
echo "starting" >&2
echo "ERROR: the runtime is not installed in /nonexistent" >&2
return 4
