# Like the bindings' env/setvars.sh: the oneCCL and Intel MPI inside the pip package.
bindings_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CCL_ROOT="$bindings_root"
export I_MPI_ROOT="$bindings_root"
export LD_LIBRARY_PATH="$bindings_root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
