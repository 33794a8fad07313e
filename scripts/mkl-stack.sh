#!/usr/bin/env bash
# mkl-stack.sh - oneMKL from its wheels, in a virtual environment: the GEMM library of the
# trainer's mkl build (make build-blas BLAS=mkl).
#
# Usage: scripts/mkl-stack.sh install|prefix|check
#
#   install  create the virtual environment when missing and pip-install the pinned wheels of
#            scripts/mkl-wheels.txt (idempotent: a second run checks the stamp and returns)
#   prefix   print the environment's directory
#   check    exit 0 when the pinned wheels are installed and libmkl_rt loads
#
# The directory is $BATCHKIT_MKL_PREFIX, default /opt/batchkit/mkl: outside the clone, so a second
# clone or CI run on the same machine reuses it (~1 GB). The python that makes the venv is
# $BATCHKIT_MKL_PYTHON, default /usr/bin/python3 (Debian's). The shape is scripts/intel-stack.sh's.
set -euo pipefail

readonly PROG=mkl-stack
readonly HERE=$(cd "$(dirname "$0")" && pwd)
readonly PINS="$HERE/mkl-wheels.txt"
readonly PREFIX="${BATCHKIT_MKL_PREFIX:-/opt/batchkit/mkl}"
readonly PYTHON="${BATCHKIT_MKL_PYTHON:-/usr/bin/python3}"
readonly STAMP="$PREFIX/.batchkit-mkl-wheels"

log() { printf '%s: %s\n' "$PROG" "$*"; }
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }

pins() { grep -v '^[[:space:]]*\(#\|$\)' "$PINS"; }

# libs_load: the header is there and libmkl_rt (what the binding links) resolves all its
# dependencies, libiomp5 among them.
libs_load() {
  local out
  [[ -f $PREFIX/include/mkl_cblas.h ]] || { echo "$PREFIX/include/mkl_cblas.h is missing"; return 1; }
  [[ -e $PREFIX/lib/libmkl_rt.so.3 ]] || { echo "$PREFIX/lib/libmkl_rt.so.3 is missing"; return 1; }
  [[ -e $PREFIX/lib/libiomp5.so ]] || { echo "$PREFIX/lib/libiomp5.so is missing"; return 1; }
  out=$(LD_LIBRARY_PATH="$PREFIX/lib" ldd "$PREFIX/lib/libmkl_rt.so.3" 2>&1) || { echo "ldd libmkl_rt.so.3: $out"; return 1; }
  if grep -q 'not found' <<<"$out"; then
    echo "$PREFIX/lib/libmkl_rt.so.3: $(grep 'not found' <<<"$out" | tr -s ' \t' ' ' | paste -sd, -)"
    return 1
  fi
}

installed() { [[ -f $STAMP ]] && [[ $(cat "$STAMP") == "$(pins)" ]] && libs_load >/dev/null; }

make_venv() {
  if [[ -e $PREFIX && ! -d $PREFIX ]]; then
    printf '%s: error: %s is not a directory (set BATCHKIT_MKL_PREFIX to a directory for the venv)\n' "$PROG" "$PREFIX" >&2
    exit 2
  fi
  [[ -x $PYTHON ]] || die "$PYTHON not found: apt-get install python3 (or set BATCHKIT_MKL_PYTHON)"
  if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
    [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null || die "$PYTHON has no venv module: apt-get install python3-venv"
    log "installing python3-venv"
    apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends python3-venv >/dev/null ||
      die "apt-get install python3-venv failed"
  fi
  mkdir -p "$(dirname "$PREFIX")" || die "cannot create $(dirname "$PREFIX") (set BATCHKIT_MKL_PREFIX to a writable directory)"
  "$PYTHON" -m venv "$PREFIX" || die "$PYTHON -m venv $PREFIX failed"
}

install() {
  # Two installs at once (two clones' make test) would pip into one venv together: the second waits.
  mkdir -p "$(dirname "$PREFIX")" 2>/dev/null || true
  if { exec 9>>"$PREFIX.lock"; } 2>/dev/null; then
    flock -w 900 9 || die "another install into $PREFIX has held $PREFIX.lock for 15 minutes"
  fi
  if installed; then log "up to date in $PREFIX"; return 0; fi
  [[ -x $PREFIX/bin/pip ]] || make_venv
  log "installing $(pins | paste -sd' ' -) into $PREFIX"
  "$PREFIX/bin/pip" install --no-input --disable-pip-version-check --timeout 60 --retries 3 -q \
    -r "$PINS" || die "pip install -r $PINS failed"
  local why
  why=$(libs_load) || die "installed, but a library does not load: $why"
  pins >"$STAMP"
  log "installed in $PREFIX"
}

case "${1:-}" in
  install) install ;;
  prefix) echo "$PREFIX" ;;
  check) installed || { why=$(libs_load 2>&1) || true; die "not installed in $PREFIX${why:+: $why} (run: $0 install)"; } ;;
  *) echo "usage: $0 install|prefix|check" >&2; exit 2 ;;
esac
