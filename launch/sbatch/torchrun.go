package sbatch

import (
	"fmt"

	"github.com/batchkit/batchkit/slurm"
)

// torchrunShell is what each node's one task runs under --torchrun.
// torchrun's node count, node rank and rendezvous come from the contract
// `batchkit exec` has just exported, so no script needs `scontrol show
// hostnames` lines; "$0" is the profile's python and "$@" the user's words
// (torchrun's own flags, then the script and its arguments), so every
// torchrun flag stays the user's to give. Static rendezvous: torchrun's
// default when no --rdzv_backend is given.
const torchrunShell = `exec "$0" -m torch.distributed.run --nnodes "$GROUP_WORLD_SIZE" --node_rank "$GROUP_RANK" ` +
	`--master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" --nproc_per_node %d "$@"`

// withTorchrun makes the job one torchrun per node with nproc workers
// each: one task per node, the program wrapped in torchrunShell. nproc 0
// leaves both as they are.
func withTorchrun(nproc int, python string, job slurm.JobOptions, program []string) (slurm.JobOptions, []string, error) {
	switch {
	case nproc == 0:
		return job, program, nil
	case nproc < 0:
		return job, nil, fmt.Errorf("--torchrun %d: want the number of workers on each node, at least 1", nproc)
	case job.NTasks > 0 || job.NTasksPerNode > 1:
		return job, nil, fmt.Errorf("--torchrun runs one task per node, whose torchrun starts the %d workers: drop --ntasks and --ntasks-per-node", nproc)
	}
	job.NTasksPerNode = 1
	return job, append([]string{"sh", "-c", fmt.Sprintf(torchrunShell, nproc), python}, program...), nil
}
