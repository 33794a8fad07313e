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
readonly HERE=$(cd "$(dirname "$0")" && pwd)
readonly PINS="$HERE/torch-requirements.txt"
readonly PREFIX="${BATCHKIT_TORCH_PREFIX:-/opt/batchkit/torch}"
readonly PYTHON="${BATCHKIT_TORCH_PYTHON:-/usr/bin/python3}"
readonly STAMP="$PREFIX/.batchkit-torch"
readonly PREFIX_VAR=BATCHKIT_TORCH_PREFIX PYTHON_VAR=BATCHKIT_TORCH_PYTHON
# A bench's install may wait for another's (2.9 GB); the wheels are not kept a second time in pip's cache.
readonly LOCK_WAIT=1800 SIZE_NOTE="~2.9 GB to download, once"
readonly PIP_FLAGS=(--no-cache-dir)
# shellcheck source=scripts/pinned-venv.sh
source "$HERE/../../../scripts/pinned-venv.sh"

# bench-train reads this script's stdout (the python's path): its messages go to stderr.
log() { printf '%s: %s\n' "$PROG" "$*" >&2; }

# libs_load: torch imports and has MKL (the point of this yardstick: PyPI's build links MKL
# statically; a torch without it would measure the same weak BLAS as Debian's 1.13).
libs_load() {
  "$PREFIX/bin/python" -c 'import sys, torch, numpy, threadpoolctl
sys.exit(0 if torch.backends.mkl.is_available() else "torch %s has no MKL" % torch.__version__)' 2>&1
}

case "${1:-}" in
  install) venv_install ;;
  python) echo "$PREFIX/bin/python" ;;
  check) venv_check ;;
  *) echo "usage: $0 install|python|check" >&2; exit 2 ;;
esac
