# shellcheck shell=bash
# pinned-venv.sh: what scripts/intel-stack.sh and scripts/mkl-stack.sh share, sourced by them: a
# virtual environment outside the clone holding the wheels pinned in a file, installed once and
# reused while the pins and the libraries' check (each script's libs_load) hold.
#
# The sourcing script sets PROG (its name in messages), PINS (the pins file), PREFIX (the venv),
# PREFIX_VAR and PYTHON_VAR (the variables a user sets them with, named in messages), PYTHON (the
# python that makes the venv) and defines libs_load (prints why and fails when a library of the
# venv does not load). STAMP records the pins the venv was installed from. Optional: LOCK_WAIT (how
# many seconds a second install waits for the first, default 900), PIP_FLAGS (more pip install
# flags, an array) and SIZE_NOTE (said when installing: what it will download).

log() { printf '%s: %s\n' "$PROG" "$*"; }
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }

# The pins without comments or blank lines: what the stamp records.
pins() { grep -v '^[[:space:]]*\(#\|$\)' "$PINS"; }

installed() { [[ -f $STAMP ]] && [[ $(cat "$STAMP") == "$(pins)" ]] && libs_load >/dev/null; }

# prefix_usable: PREFIX is a directory or nothing yet (exit 2 otherwise), before anything is
# written beside it (the lock file).
prefix_usable() {
  if [[ -e $PREFIX && ! -d $PREFIX ]]; then
    printf '%s: error: %s is not a directory (set %s to a directory for the venv)\n' "$PROG" "$PREFIX" "$PREFIX_VAR" >&2
    exit 2
  fi
}

make_venv() {
  [[ -x $PYTHON ]] || die "$PYTHON not found: apt-get install python3 (or set $PYTHON_VAR)"
  if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
    [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null || die "$PYTHON has no venv module: apt-get install python3-venv"
    log "installing python3-venv"
    apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends python3-venv >/dev/null ||
      die "apt-get install python3-venv failed"
  fi
  mkdir -p "$(dirname "$PREFIX")" || die "cannot create $(dirname "$PREFIX") (set $PREFIX_VAR to a writable directory)"
  "$PYTHON" -m venv "$PREFIX" || die "$PYTHON -m venv $PREFIX failed"
}

# venv_install: the pinned wheels into PREFIX unless they are there and load.
venv_install() {
  prefix_usable
  # Two installs at once (two clones' make test) would pip into one venv together: the second waits.
  mkdir -p "$(dirname "$PREFIX")" 2>/dev/null || true
  local wait=${LOCK_WAIT:-900}
  if { exec 9>>"$PREFIX.lock"; } 2>/dev/null; then
    flock -w "$wait" 9 || die "another install into $PREFIX has held $PREFIX.lock for $((wait / 60)) minutes"
  fi
  if installed; then log "up to date in $PREFIX"; return 0; fi
  [[ -x $PREFIX/bin/pip ]] || make_venv
  log "installing $(pins | paste -sd' ' -) into $PREFIX${SIZE_NOTE:+ ($SIZE_NOTE)}"
  # --no-input: never wait for a prompt; the timeout and retries bound a registry that stalls.
  "$PREFIX/bin/pip" install --no-input --disable-pip-version-check --timeout 60 --retries 3 -q \
    ${PIP_FLAGS[@]+"${PIP_FLAGS[@]}"} -r "$PINS" || die "pip install -r $PINS failed"
  local why
  why=$(libs_load) || die "installed, but a library does not load: $why"
  pins >"$STAMP"
  log "installed in $PREFIX"
}

# venv_check: exit 0 when installed, else say why.
venv_check() {
  local why
  installed || { why=$(libs_load 2>&1) || true; die "not installed in $PREFIX${why:+: $why} (run: $0 install)"; }
}
