# A stand-in for the oneAPI compiler runtime's env/vars.sh: prepends its
# bin and lib directories, as the real one does, without looking whether
# they are there already.
compiler_root=$(cd "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
export CMPLR_ROOT=$compiler_root
export PATH="$compiler_root/bin${PATH:+:$PATH}"
export LD_LIBRARY_PATH="$compiler_root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
