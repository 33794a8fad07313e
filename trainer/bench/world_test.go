package bench

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchkit/batchkit/detect"
	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/internal/freeport"
	"github.com/batchkit/batchkit/trainer/collective"
)

// A real world: this test binary started as worldSize ranks of a TCP world
// (the torchrun contract, as batchkit run sets it), each running
// TestWorldRank. Every op and dtype is measured and checked on 3 ranks, so
// that allgather and reducescatter sizes are rounded to blocks of 3; only
// rank 0 writes. Then a corrupted element on rank 2 must fail every rank
// with the same CheckError, without a hang (v(5) = 6, times 1+2+3).
const worldSize = 3

func TestWorld(t *testing.T) {
	if os.Getenv("BENCH_TEST_WORLD") != "" {
		t.Skip("a rank of the world, not its parent")
	}
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, mode := range []string{"measure", "corrupt"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			outs := startWorld(t, mode, dir)
			if mode == "corrupt" {
				for r, out := range outs {
					if want := "check: allreduce 256 B (256 bytes): wrong result on rank 2: element 5 is 1e+06, want 36"; !strings.Contains(out, want) {
						t.Errorf("rank %d said %q, want %q", r, out, want)
					}
				}
				return
			}
			f, err := os.Open(filepath.Join(dir, "rank0.out"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			results, err := ReadResults(f, "rank 0's output")
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]int64{}
			for _, r := range results {
				if r.Backend != "tcp" || r.Ranks != worldSize || !(r.MinUs <= r.AvgUs && r.AvgUs <= r.MaxUs) {
					t.Errorf("result %+v", r)
				}
				if want := r.AlgBW * BusFactor(Collective(r.Op), worldSize); math.Abs(r.BusBW-want) > 2e-6+want/1000 { // both rounded to 1e-6
					t.Errorf("%s %d B: busbw %v, algbw %v", r.Op, r.Bytes, r.BusBW, r.AlgBW)
				}
				got[r.Op+"/"+r.DType] = append(got[r.Op+"/"+r.DType], r.Bytes)
			}
			for _, op := range Collectives {
				for _, dt := range []collective.DType{collective.Float32, collective.Float64} {
					want := Sizes(op, dt, worldSize, 8, 64<<10)
					if k := string(op) + "/" + dt.String(); fmt.Sprint(got[k]) != fmt.Sprint(want) {
						t.Errorf("%s sizes %v, want %v", k, got[k], want)
					}
				}
			}
			for r := 1; r < worldSize; r++ {
				if b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank%d.out", r))); len(b) > 0 {
					t.Errorf("rank %d wrote %q: only rank 0 writes", r, b)
				}
			}
		})
	}
}

// startWorld runs the ranks and returns what each reported on failure.
func startWorld(t *testing.T, mode, dir string) []string {
	t.Helper()
	port, err := freeport.BelowEphemeral("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	tok := make([]byte, 16)
	rand.Read(tok)

	var base []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "SLURM_") && !strings.HasPrefix(k, "OMPI_") &&
			!strings.HasPrefix(k, "PMI") && !strings.HasPrefix(k, "MV2_") && !strings.HasPrefix(k, "PALS_") {
			base = append(base, kv)
		}
	}
	cmds := make([]*exec.Cmd, worldSize)
	for r := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWorldRank$", "-test.count=1", "-test.v")
		cmd.Env = append(base,
			"BENCH_TEST_WORLD="+mode, "BENCH_TEST_OUT="+filepath.Join(dir, fmt.Sprintf("rank%d.out", r)),
			"RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(worldSize),
			"LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE="+strconv.Itoa(worldSize),
			"GROUP_RANK=0", "GROUP_WORLD_SIZE=1", "NODE_RANK=0",
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port),
			envvars.Token+"="+hex.EncodeToString(tok))
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[r] = cmd
	}
	outs := make([]string, worldSize)
	deadline := time.AfterFunc(2*time.Minute, func() {
		for _, c := range cmds {
			c.Process.Kill()
		}
	})
	defer deadline.Stop()
	for r, c := range cmds {
		err := c.Wait()
		outs[r] = c.Stdout.(*strings.Builder).String()
		if err != nil {
			t.Errorf("rank %d: %v\n%s", r, err, outs[r])
		}
	}
	return outs
}

// TestWorldRank is one rank of TestWorld's world.
func TestWorldRank(t *testing.T) {
	mode := os.Getenv("BENCH_TEST_WORLD")
	if mode == "" {
		t.Skip("run by TestWorld as a rank of its world")
	}
	topo, err := detect.Detect(os.Getenv, detect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := collective.Init(collective.Config{Topology: topo, Backend: collective.TCP, Getenv: os.Getenv, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, err := os.Create(os.Getenv("BENCH_TEST_OUT"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()

	if mode == "corrupt" {
		checkHook = func(rank int, bytes int64, result any) {
			if rank == 2 && bytes == 256 {
				result.([]float32)[5] = 1e6
			}
		}
		results, err := Run(c, out, Options{MaxBytes: 1024, Iters: 2, Format: JSON})
		var ce *CheckError
		if !errors.As(err, &ce) || ce.Rank != 2 || ce.Index != 5 || ce.Bytes != 256 || len(results) != 5 {
			t.Fatalf("Run with a corrupted result on rank 2: %d results, %v", len(results), err)
		}
		t.Logf("check: %v", err) // the parent compares every rank's message
		return
	}
	for _, op := range Collectives {
		for _, dt := range []collective.DType{collective.Float32, collective.Float64} {
			// A short settle: the ranks must still agree when to stop.
			if _, err := Run(c, out, Options{Op: op, DType: dt, MaxBytes: 64 << 10, Iters: 3, Format: JSON, Settle: 5 * time.Millisecond}); err != nil {
				t.Fatalf("%s %s: %v", op, dt, err)
			}
		}
	}
}
