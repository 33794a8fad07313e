# A stand-in for Intel oneAPI's setvars.sh, written for batchkit's tests
# after its documented behaviour (not its code):
#   - it must be sourced; it finds its own directory through BASH_SOURCE;
#   - it refuses a second run in the same environment (SETVARS_COMPLETED=1)
#     unless given --force: a warning on stdout, return 3;
#   - --config=FILE names the components to load ("NAME=latest" or
#     "NAME=exclude" lines; default: every component), --help prints usage,
#     any other argument is passed on to each component's env/vars.sh;
#   - it sources each component's env/vars.sh with SETVARS_CALL=1 set, then
#     exports SETVARS_COMPLETED=1;
#   - it chatters on stdout and returns non-zero when a component fails.

if ! (return 0 2>/dev/null); then
  echo "   ERROR: Incorrect usage: this script must be sourced."
  exit 255
fi

setvars_root=$(cd "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
setvars_force=0
setvars_config=""
setvars_pass=()
for setvars_arg in "$@"; do
  case "$setvars_arg" in
    --force) setvars_force=1 ;;
    --config=*) setvars_config=${setvars_arg#--config=} ;;
    --help) echo "usage: source setvars.sh [--force] [--config=file] [--help] [...]"; return 0 ;;
    *) setvars_pass+=("$setvars_arg") ;;
  esac
done

if [ "${SETVARS_COMPLETED:-}" = 1 ] && [ "$setvars_force" = 0 ]; then
  echo ":: WARNING: setvars.sh has already been run. Skipping re-execution."
  echo "   To force a re-execution of setvars.sh, use the '--force' option."
  echo "   Using '--force' can result in excessive use of your environment variables."
  return 3
fi
if [ -n "$setvars_config" ] && [ ! -r "$setvars_config" ]; then
  echo ":: ERROR: config file $setvars_config not found" >&2
  return 1
fi

echo ":: initializing oneAPI environment ..."
echo "   $(basename -- "$0"): BASH_VERSION = $BASH_VERSION"
echo "   args: Using \"\$@\" for setvars.sh arguments: $*"
export SETVARS_CALL=1
setvars_rc=0
for setvars_vars in "$setvars_root"/*/latest/env/vars.sh; do
  setvars_comp=${setvars_vars#"$setvars_root"/}
  setvars_comp=${setvars_comp%%/*}
  if [ -n "$setvars_config" ] && grep -qx "$setvars_comp=exclude" "$setvars_config"; then
    continue
  fi
  echo ":: $setvars_comp -- latest"
  # shellcheck disable=SC1090
  . "$setvars_vars" "${setvars_pass[@]}" || setvars_rc=$?
done
unset SETVARS_CALL
if [ "$setvars_rc" != 0 ]; then
  echo ":: ERROR: a component's env/vars.sh failed ($setvars_rc)" >&2
  return "$setvars_rc"
fi
export SETVARS_COMPLETED=1
echo ":: oneAPI environment initialized ::"
return 0
