#!/usr/bin/env bash
# capture-intel-env.sh - regenerate detect/testdata/intelmpi/*.env from real Intel MPI ranks:
# Hydra on this host, Hydra inside a 2-node batch job (-bootstrap slurm), and srun --mpi=pmi2.
# Needs the Intel stack (scripts/intel-stack.sh install) and the local cluster (local-cluster.sh up).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PREFIX=$("$HERE/intel-stack.sh" prefix)
OUT=$HERE/../detect/testdata/intelmpi
WORK=$(mktemp -d /tmp/batchkit-capture-XXXXXX)
chmod 777 "$WORK"
trap 'rm -rf "$WORK"' EXIT
cat >"$WORK/cap.sh" <<'CAP'
#!/bin/sh
env | sort >"$(dirname "$0")/$1.${PMI_RANK:-${SLURM_PROCID:-x}}.env"
CAP
chmod +x "$WORK/cap.sh"
env -i PATH="$PREFIX/bin:/usr/bin:/bin" HOME="$HOME" "$PREFIX/bin/mpiexec" -n 2 "$WORK/cap.sh" local
cat >"$WORK/job.sh" <<JOB
#!/bin/bash
export PATH=$PREFIX/bin:\$PATH
mpiexec -bootstrap slurm -n 4 -ppn 2 $WORK/cap.sh hydra-slurm
I_MPI_PMI_LIBRARY=/usr/lib/x86_64-linux-gnu/libpmi2.so.0 srun --mpi=pmi2 -n 4 $WORK/cap.sh srun-pmi2
JOB
sbatch --wait -N2 --ntasks-per-node=2 --time=5 -o "$WORK/job.out" "$WORK/job.sh" >/dev/null
# Slurm's, PMI's, Hydra's and Intel MPI's variables, less those that differ on every run or machine.
filter() {
  grep -E '^(SLURM_|SLURMD_NODENAME|PMI_|MPI_LOCAL|I_MPI_|HYDRA_)' "$1" |
    grep -vE '^(I_MPI_INFO_|I_MPI_HYDRA_UUID|I_MPI_PMI_LIBRARY|SLURM_(CONF|SRUN_COMM|CPU|MEM|GTIDS|JOB_(UID|USER|GID|NAME|CPUS|ACCOUNT|PARTITION|QOS)|TOPOLOGY|SUBMIT|CLUSTER|WORKING|SCRIPT|PRIO|TASK_PID|UMASK|LAUNCH_NODE|DISTRIB|STEP_LAUNCHER|EXPORT_ENV|GET_USER_ENV|NODE_ALIASES)|HYDRA_BSTRAP_(DOWNSTREAM|UPSTREAM|PGID|DEBUG|TREE|NUM_LAUNCH|LOCALHOST))' || true
}
mkdir -p "$OUT"
# source:file:launcher rank world local localsize node nodes (what the launch was)
for spec in "local.0:local-rank0:hydra 0 2 0 2 0 1" "local.1:local-rank1:hydra 1 2 1 2 0 1" \
  "hydra-slurm.0:sbatch-hydra-rank0:hydra 0 4 0 2 0 2" "hydra-slurm.3:sbatch-hydra-rank3:hydra 3 4 1 2 1 2" \
  "srun-pmi2.0:srun-pmi2-rank0:slurm 0 4 0 2 0 2" "srun-pmi2.3:srun-pmi2-rank3:slurm 3 4 1 2 1 2"; do
  src=${spec%%:*} rest=${spec#*:}
  name=${rest%%:*}
  read -r l r w lr ls n nn <<<"${rest#*:}"
  {
    echo "# Captured from a real Intel MPI rank (the impi-rt wheel) on the local two-node cluster"
    echo "# (Slurm 22.05) by scripts/capture-intel-env.sh; variables of Slurm, PMI, Hydra and I_MPI_ only."
    echo "# want: launcher=$l rank=$r world=$w local=$lr/$ls node=$n/$nn"
    filter "$WORK/$src.env"
  } >"$OUT/$name.env"
done
echo "capture-intel-env: wrote $OUT"
