#!/usr/bin/env bash
# intel-stack.sh - Intel MPI and oneCCL from their wheels, in a virtual environment.
#
# Usage: scripts/intel-stack.sh install|prefix|check
#
#   install  create the virtual environment when missing and pip-install the pinned wheels of
#            scripts/intel-wheels.txt (idempotent: a second run checks the stamp and returns)
#   prefix   print the environment's directory (what the intel-pip profile calls the prefix)
#   check    exit 0 when the pinned wheels are installed and their libraries load
#   cgo-key  print the CGO_CFLAGS word every cgo build against the wheels adds (see Makefile)
#   pkgconfig DIR
#            write DIR/mpich.pc: Intel MPI's mpi.h and libmpi.so.12 under the name the cgo MPI
#            backend's build tag mpich asks pkg-config for (make build-mpi MPI=intel), with a
#            RUNPATH to the wheel's lib/, so the binary starts without LD_LIBRARY_PATH
#
# The directory is $BATCHKIT_INTEL_PREFIX, default /opt/batchkit/intel: outside the clone, so a
# second clone or CI run on the same machine reuses it (~550 MB). The python that makes the venv is
# $BATCHKIT_INTEL_PYTHON, default /usr/bin/python3 (Debian's; another python3 may come first on PATH).
set -euo pipefail

readonly PROG=intel-stack
readonly HERE=$(cd "$(dirname "$0")" && pwd)
readonly PINS="$HERE/intel-wheels.txt"
readonly PREFIX="${BATCHKIT_INTEL_PREFIX:-/opt/batchkit/intel}"
readonly PYTHON="${BATCHKIT_INTEL_PYTHON:-/usr/bin/python3}"
readonly STAMP="$PREFIX/.batchkit-intel-wheels"
readonly PREFIX_VAR=BATCHKIT_INTEL_PREFIX PYTHON_VAR=BATCHKIT_INTEL_PYTHON
# shellcheck source=scripts/pinned-venv.sh
source "$HERE/pinned-venv.sh"

# libs_load: every shared library the stack's users link against resolves all its dependencies
# (ldd prints "not found" for one that does not: oneccl-cpu 2021.17+ lacks libccl.so.2).
libs_load() {
  local lib out
  for lib in libmpi.so.12 libccl.so.1 libfabric.so.1; do
    [[ -e $PREFIX/lib/$lib ]] || { echo "$PREFIX/lib/$lib is missing"; return 1; }
    out=$(LD_LIBRARY_PATH="$PREFIX/lib" ldd "$PREFIX/lib/$lib" 2>&1) || { echo "ldd $lib: $out"; return 1; }
    if grep -q 'not found' <<<"$out"; then
      echo "$PREFIX/lib/$lib: $(grep 'not found' <<<"$out" | tr -s ' \t' ' ' | paste -sd, -)"
      return 1
    fi
  done
  for bin in mpiexec.hydra hydra_pmi_proxy; do
    [[ -x $PREFIX/bin/$bin ]] || { echo "$PREFIX/bin/$bin is missing"; return 1; }
  done
}

# Slurm's PMI-2 client library: Intel MPI ranks started by `srun --mpi=pmi2` load it through
# I_MPI_PMI_LIBRARY (Intel MPI's own PMI does not speak to slurmd). Debian's libpmi2-0.
readonly PMI2_LIB=/usr/lib/x86_64-linux-gnu/libpmi2.so.0
pmi2() {
  [[ -e $PMI2_LIB ]] && return 0
  [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null || { log "warning: $PMI2_LIB missing (apt-get install libpmi2-0): no srun --mpi=pmi2 for Intel MPI"; return 0; }
  log "installing libpmi2-0 (Slurm's PMI-2 library, for srun --mpi=pmi2)"
  apt-get install -y -q --no-install-recommends libpmi2-0 >/dev/null ||
    { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends libpmi2-0 >/dev/null; } ||
    die "apt-get install libpmi2-0 failed"
}

install() {
  pmi2
  venv_install
}

# pkgconfig DIR: Intel MPI as pkg-config's "mpich" (the wheel ships no impi.pc or mpich.pc; its
# ccl.pc names a "Requires: impi" that is not there). Intel MPI is MPICH-ABI: mpi.h is MPICH's
# interface, the library libmpi.so.12.
pkgconfig() {
  local dir=$1 version
  [[ -n $dir ]] || { echo "usage: $0 pkgconfig DIR" >&2; exit 2; }
  installed || die "not installed in $PREFIX (run: $0 install)"
  [[ -f $PREFIX/include/mpi.h ]] || die "$PREFIX/include/mpi.h is missing: the impi-devel wheel is not installed (pip install impi-devel)"
  version=$(pins | sed -n 's/^impi-devel==//p')
  mkdir -p "$dir"
  cat >"$dir/mpich.pc" <<EOF
# Written by scripts/intel-stack.sh pkgconfig: Intel MPI $version from the impi-devel wheel in
# $PREFIX, as the MPICH ABI. RUNPATH: the binary finds libmpi.so.12 there without
# LD_LIBRARY_PATH (which still wins when set).
prefix=$PREFIX
Name: mpich
Description: Intel MPI (MPICH ABI) from the impi-devel wheel
Version: $version
Cflags: -I\${prefix}/include
Libs: -L\${prefix}/lib -Wl,-rpath,\${prefix}/lib -lmpi
EOF
}

case "${1:-}" in
  install) install ;;
  prefix) echo "$PREFIX" ;;
  check) venv_check ;;
  pkgconfig) pkgconfig "${2:-}" ;;
  # cgo-key: a CGO_CFLAGS word that tells Go's build cache this prefix's Intel MPI from Debian's
  # MPICH (the cache keys cgo packages by the pkg-config command, not PKG_CONFIG_PATH).
  cgo-key) echo "-DBK_INTEL_MPI_PREFIX=$PREFIX" ;;
  *) echo "usage: $0 install|prefix|check|pkgconfig DIR|cgo-key" >&2; exit 2 ;;
esac
