# Hangs, with a child of its own: a timeout must kill the whole group.
export SLOW_STARTED=1
sleep 317 &
sleep 317
