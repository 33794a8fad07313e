# A stand-in for the oneCCL bindings' env/setvars.sh: the real one points
# CCL_ROOT, I_MPI_ROOT, FI_PROVIDER_PATH, PATH and LD_LIBRARY_PATH at the
# oneCCL and Intel MPI inside the wheel. This one sets what it can show.
bindings_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CCL_ROOT="$bindings_root"
export I_MPI_ROOT="$bindings_root"
export FI_PROVIDER_PATH="$bindings_root/lib/prov"
export LD_LIBRARY_PATH="$bindings_root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
