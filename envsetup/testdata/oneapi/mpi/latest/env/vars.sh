# A stand-in for Intel MPI's env/vars.sh: I_MPI_ROOT, and its bin (where
# its mpirun is) and lib directories prepended.
mpi_root=$(cd "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
export I_MPI_ROOT=$mpi_root
export PATH="$mpi_root/bin${PATH:+:$PATH}"
export LD_LIBRARY_PATH="$mpi_root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
