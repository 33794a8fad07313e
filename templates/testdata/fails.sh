# Sourced by env_test.go's batch scripts: fails as setvars.sh does when a
# component's env/vars.sh fails.
echo ":: ERROR: a component's env/vars.sh failed (3)" >&2
return 3
