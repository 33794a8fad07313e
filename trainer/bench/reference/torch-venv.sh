#!/usr/bin/env bash
# torch-venv.sh - the current PyTorch of torch-requirements.txt in a virtual environment, for
# make bench-train (not make test: it is large, see torch-requirements.txt).
#
# Usage: trainer/bench/reference/torch-venv.sh install|python|check
#
#   install  create the environment when missing and pip-install the pinned packages
#            (idempotent: a stamp records the pins; a second run checks it and returns)
#   python   print the environment's python
#   check    exit 0 when the pins are installed and torch imports with MKL
#
# The directory is $BATCHKIT_TORCH_PREFIX, default /opt/batchkit/torch: outside the clone, so a
# second clone on the same machine reuses it. The python that makes the venv is
# $BATCHKIT_TORCH_PYTHON, default /usr/bin/python3 (Debian's, the one python3-torch 1.13 runs on).
set -euo pipefail

readonly PROG=torch-venv
readonly PINS="$(cd "$(dirname "$0")" && pwd)/torch-requirements.txt"
readonly PREFIX="${BATCHKIT_TORCH_PREFIX:-/opt/batchkit/torch}"
readonly PYTHON="${BATCHKIT_TORCH_PYTHON:-/usr/bin/python3}"
readonly STAMP="$PREFIX/.batchkit-torch"

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }

pins() { grep -v '^[[:space:]]*\(#\|$\)' "$PINS"; }

# works: torch imports and has MKL (the point of this yardstick: PyPI's build links MKL
# statically; a torch without it would measure the same weak BLAS as Debian's 1.13).
works() {
  "$PREFIX/bin/python" -c 'import sys, torch, numpy, threadpoolctl
sys.exit(0 if torch.backends.mkl.is_available() else "torch %s has no MKL" % torch.__version__)'
}

installed() { [[ -f $STAMP ]] && [[ $(cat "$STAMP") == "$(pins)" ]] && works >/dev/null 2>&1; }

make_venv() {
  if [[ -e $PREFIX && ! -d $PREFIX ]]; then
    printf '%s: error: %s is not a directory (set BATCHKIT_TORCH_PREFIX to a directory for the venv)\n' "$PROG" "$PREFIX" >&2
    exit 2
  fi
  [[ -x $PYTHON ]] || die "$PYTHON not found: apt-get install python3 (or set BATCHKIT_TORCH_PYTHON)"
  if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
    [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null || die "$PYTHON has no venv module: apt-get install python3-venv"
    log "installing python3-venv"
    apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends python3-venv >/dev/null ||
      die "apt-get install python3-venv failed"
  fi
  mkdir -p "$(dirname "$PREFIX")" || die "cannot create $(dirname "$PREFIX") (set BATCHKIT_TORCH_PREFIX to a writable directory)"
  "$PYTHON" -m venv "$PREFIX" || die "$PYTHON -m venv $PREFIX failed"
}

install() {
  mkdir -p "$(dirname "$PREFIX")" 2>/dev/null || true
  # Two benches at once would pip into one venv together: the second waits.
  if { exec 9>>"$PREFIX.lock"; } 2>/dev/null; then
    flock -w 1800 9 || die "another install into $PREFIX has held $PREFIX.lock for 30 minutes"
  fi
  if installed; then return 0; fi
  [[ -x $PREFIX/bin/pip ]] || make_venv
  log "installing $(pins | paste -sd' ' -) into $PREFIX (~2.9 GB to download, once)"
  # --no-cache-dir: the wheels are not kept a second time in pip's cache.
  "$PREFIX/bin/pip" install --no-input --disable-pip-version-check --no-cache-dir --timeout 60 --retries 3 -q \
    -r "$PINS" || die "pip install -r $PINS failed"
  local why
  why=$(works 2>&1) || die "installed, but torch does not work: $why"
  pins >"$STAMP"
  log "installed in $PREFIX"
}

case "${1:-}" in
  install) install ;;
  python) echo "$PREFIX/bin/python" ;;
  check) installed || die "not installed in $PREFIX (run: $0 install)" ;;
  *) echo "usage: $0 install|python|check" >&2; exit 2 ;;
esac
