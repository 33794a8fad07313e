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
readonly PREFIX_VAR=BATCHKIT_MKL_PREFIX PYTHON_VAR=BATCHKIT_MKL_PYTHON
# shellcheck source=scripts/pinned-venv.sh
source "$HERE/pinned-venv.sh"

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

case "${1:-}" in
  install) venv_install ;;
  prefix) echo "$PREFIX" ;;
  check) venv_check ;;
  *) echo "usage: $0 install|prefix|check" >&2; exit 2 ;;
esac
