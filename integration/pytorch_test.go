package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// python is Debian's interpreter, which has python3-torch; another python3
// (pyenv's shims here) may come first on PATH.
const python = "/usr/bin/python3"

// ddpScript is the PyTorch example, as a user runs it: by absolute path,
// readable on both "nodes" (this host).
func ddpScript(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "examples", "pytorch", "train_ddp.py"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// needTorch checks that python has torch.distributed with gloo.
func needTorch(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs PyTorch")
	}
	out, err := exec.Command(python, "-c", "import torch.distributed as d; assert d.is_gloo_available()").CombinedOutput()
	if err != nil {
		requireOrSkip(t, fmt.Sprintf("%s has no torch.distributed with gloo (apt-get install python3-torch): %v %s", python, err, out))
	}
}

// ddpRankLine is what each rank of train_ddp.py prints once it has joined;
// ddpFinal rank 0's last line. Matched anywhere, not by line: Hydra's output
// forwarding can join two ranks' lines, and torchrun prefixes them.
var (
	ddpRankLine = regexp.MustCompile(`rank=(\d+) world_size=(\d+) local_rank=(\d+)`)
	ddpFinal    = regexp.MustCompile(`final test_accuracy=([0-9.]+) world_size=(\d+)`)
)

// ddpRank is one rank's view of its place, as train_ddp.py printed it.
type ddpRank struct{ Rank, WorldSize, LocalRank int }

// ddpResult reads every rank's line, sorted by rank, and rank 0's final
// accuracy and world size.
func ddpResult(t *testing.T, out string) (ranks []ddpRank, acc float64, world int) {
	t.Helper()
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	byRank := map[int]ddpRank{}
	for _, m := range ddpRankLine.FindAllStringSubmatch(out, -1) {
		r := ddpRank{atoi(m[1]), atoi(m[2]), atoi(m[3])}
		if _, dup := byRank[r.Rank]; dup {
			t.Errorf("rank %d printed twice:\n%s", r.Rank, out)
		}
		byRank[r.Rank] = r
	}
	for i := 0; i < len(byRank); i++ {
		ranks = append(ranks, byRank[i])
	}
	fin := ddpFinal.FindAllStringSubmatch(out, -1)
	if len(fin) != 1 {
		t.Fatalf("want one final line from rank 0, got %d in:\n%s", len(fin), out)
	}
	acc, err := strconv.ParseFloat(fin[0][1], 64)
	if err != nil {
		t.Fatalf("final line %q: %v", fin[0][0], err)
	}
	return ranks, acc, atoi(fin[0][2])
}

// sbatchOutput runs `batchkit sbatch --wait -o FILE args...` and returns
// the job's output.
func sbatchOutput(t *testing.T, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	out := filepath.Join(dir, "job.out")
	run(t, 3*time.Minute, bin, append([]string{"sbatch", "--wait", "-o", out}, args...)...)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// torchrunOnEveryNode is the recipe for torchrun under a launcher of one's
// own (what `batchkit sbatch --torchrun` writes), with one task per node:
// each runs torchrun, its node count, node rank and rendezvous from the
// contract batchkit exec sets. "$0" is the python, "$@" torchrun's
// arguments; Debian's torch 1.13 on Python 3.11 needs --redirects 1 --tee 1
// among them (its to_map fails without: an upstream enum bug).
const torchrunOnEveryNode = `exec "$0" -m torch.distributed.run --nnodes "$GROUP_WORLD_SIZE" --node_rank "$GROUP_RANK" ` +
	`--master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" --nproc_per_node 2 "$@"`

// pythonProfile writes a profile: the local one, training with python.
func pythonProfile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "torch.toml")
	if err := os.WriteFile(p, []byte(fmt.Sprintf("extends = \"local\"\n[env]\npython = %q\n", python)), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A plain PyTorch DDP script (examples/pytorch, env:// rendezvous, gloo)
// trains under every launcher batchkit offers, every rank seeing the world
// the launcher made: batchkit run and batchkit mpirun (both flavors) on this
// host, srun, batchkit mpirun inside an allocation, batchkit sbatch with
// srun (pmi2 and pmix), mpirun.openmpi and mpirun.mpich, and torchrun nested
// in an srun step (one per node, 2 workers each) and in the batch script
// batchkit sbatch --torchrun writes, under srun, mpirun.openmpi and
// mpirun.mpich. The cluster's
// launches run in parallel.
func TestPyTorchDDPEveryLauncher(t *testing.T) {
	cpu.enter(t)
	needTorch(t)
	script := ddpScript(t)
	ompiFlags := []string{"--allow-run-as-root", "--oversubscribe"}
	// Two cluster launches at a time: two jobs of 4 ranks fill the
	// cluster, and one queued longer than its minutes would fail.
	twoJobs := make(gate, 2)
	for _, tc := range []struct {
		name    string
		tool    string // needed on PATH
		cluster bool
		world   int // ranks
		perNode int // ranks per node, which sets each rank's local rank
		launch  func(t *testing.T) string
	}{
		{name: "batchkit run", world: 2, perNode: 2, launch: func(t *testing.T) string {
			return runLocal(t, bin, "run", "-n", "2", "--", python, script)
		}},
		{name: "batchkit mpirun openmpi", tool: "mpirun.openmpi", world: 2, perNode: 2, launch: func(t *testing.T) string {
			args := append(append([]string{"mpirun", "--flavor", "openmpi", "-n", "2"}, ompiFlags...), "--", python, script)
			return runLocal(t, bin, args...)
		}},
		{name: "batchkit mpirun mpich", tool: "mpirun.mpich", world: 2, perNode: 2, launch: func(t *testing.T) string {
			return runLocal(t, bin, "mpirun", "--flavor", "mpich", "-n", "2", "--", python, script)
		}},
		{name: "srun batchkit exec", cluster: true, world: 4, perNode: 2, launch: func(t *testing.T) string {
			return run(t, 2*time.Minute, "srun", "-N2", "--ntasks-per-node=2", "--time=5", bin, "exec", "--", python, script)
		}},
		{name: "batchkit mpirun openmpi in sbatch", tool: "mpirun.openmpi", cluster: true, world: 4, perNode: 2, launch: func(t *testing.T) string {
			return sbatchWait(t, fmt.Sprintf("%s mpirun --flavor openmpi %s -n 4 -- %s %s\n", bin, strings.Join(ompiFlags, " "), python, script),
				"-N2", "--ntasks-per-node=2")
		}},
		{name: "batchkit mpirun mpich in sbatch", tool: "mpirun.mpich", cluster: true, world: 4, perNode: 2, launch: func(t *testing.T) string {
			return sbatchWait(t, fmt.Sprintf("%s mpirun --flavor mpich -n 4 -- %s %s\n", bin, python, script), "-N2", "--ntasks-per-node=2")
		}},
		{name: "batchkit sbatch srun", cluster: true, world: 4, perNode: 2, launch: func(t *testing.T) string {
			return sbatchOutput(t, "--launcher", "srun", "--flavor", "mpich", "-N", "2", "--ntasks-per-node", "2", "--", python, script)
		}},
		{name: "batchkit sbatch srun pmix", cluster: true, world: 4, perNode: 2, launch: func(t *testing.T) string {
			return sbatchOutput(t, "--launcher", "srun", "-N", "2", "--ntasks-per-node", "2", "--", python, script) // local: Open MPI's srun --mpi=pmix
		}},
		{name: "batchkit sbatch openmpi", tool: "mpirun.openmpi", cluster: true, world: 4, perNode: 2, launch: func(t *testing.T) string {
			return sbatchOutput(t, "-N", "2", "--ntasks-per-node", "2", "--", python, script) // the local profile
		}},
		{name: "batchkit sbatch mpich", tool: "mpirun.mpich", cluster: true, world: 4, perNode: 2, launch: func(t *testing.T) string {
			return sbatchOutput(t, "--flavor", "mpich", "-N", "2", "--ntasks-per-node", "2", "--", python, script)
		}},
		{name: "torchrun under srun batchkit exec", cluster: true, world: 4, perNode: 2, launch: func(t *testing.T) string {
			return run(t, 2*time.Minute, "srun", "-N2", "--ntasks-per-node=1", "--time=5", bin, "exec", "--",
				"sh", "-c", torchrunOnEveryNode, python, "--redirects", "1", "--tee", "1", script)
		}},
		{name: "batchkit sbatch --torchrun srun", cluster: true, world: 4, perNode: 2, launch: func(t *testing.T) string {
			return sbatchOutput(t, "--profile", pythonProfile(t), "--launcher", "srun", "--flavor", "mpich", "--torchrun", "2", "-N", "2",
				"--", "--redirects", "1", "--tee", "1", script)
		}},
		{name: "batchkit sbatch --torchrun openmpi", tool: "mpirun.openmpi", cluster: true, world: 4, perNode: 2, launch: func(t *testing.T) string {
			return sbatchOutput(t, "--profile", pythonProfile(t), "--torchrun", "2", "-N", "2",
				"--", "--redirects", "1", "--tee", "1", script)
		}},
		{name: "batchkit sbatch --torchrun mpich", tool: "mpirun.mpich", cluster: true, world: 4, perNode: 2, launch: func(t *testing.T) string {
			return sbatchOutput(t, "--profile", pythonProfile(t), "--flavor", "mpich", "--torchrun", "2", "-N", "2",
				"--", "--redirects", "1", "--tee", "1", script)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cluster {
				needCluster(t)
				// sbatch --wait polls: a job of 10-20 s returns after ~40.
				// Slurm queues what does not fit on the two nodes.
				twoJobs.enter(t)
			}
			if tc.tool != "" {
				needTool(t, tc.tool)
			}
			began := time.Now()
			out := tc.launch(t)
			ranks, acc, world := ddpResult(t, out)
			var want []ddpRank
			for r := 0; r < tc.world; r++ {
				want = append(want, ddpRank{Rank: r, WorldSize: tc.world, LocalRank: r % tc.perNode})
			}
			if diff := cmp.Diff(want, ranks); diff != "" {
				t.Errorf("ranks (-want +got):\n%s\noutput:\n%s", diff, out)
			}
			if world != tc.world {
				t.Errorf("rank 0's final line says world_size=%d, want %d", world, tc.world)
			}
			if acc < 0.9 {
				t.Errorf("test accuracy %.4f, want >= 0.9:\n%s", acc, out)
			}
			t.Logf("test accuracy %.4f, %d ranks, %.1f s", acc, world, time.Since(began).Seconds())
		})
	}
}
