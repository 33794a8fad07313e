//go:build (mpi || mpich) && !(mpi && mpich)

package mpi_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/batchkit/batchkit/trainer/collective"
	"github.com/batchkit/batchkit/trainer/collective/internal/handoff"
	"github.com/batchkit/batchkit/trainer/collective/mpi"
)

// BenchmarkMPIIdle is what AllreduceIdle's sleeps trade: the time of a
// call against the CPU the rank spends in it, for the polling Allreduce
// and AllreduceIdle at several sleep ranges (BATCHKIT_IDLE_POLL's), on the
// two buckets of the trainer's --hidden 1024,1024 model at 1 MiB (4.24 MB
// and 0.27 MB). Either both ranks call at once, or the last rank calls
// 2 ms late, as a rank does whose backward pass is behind: the others'
// CPU in the call is then what the compute beside it lost. Rounds take
// turns between the modes; rank 0 prints one JSON line per size, delay and
// mode: the median over rounds of the wall and CPU (this process's user +
// system, every thread) per call.
//
//	mpirun.mpich -n 2 /tmp/coll_mpich.test -test.run '^$' -test.bench '^BenchmarkMPIIdle$' -test.benchtime 1x
func BenchmarkMPIIdle(t *testing.B) {
	c, _, _ := mpiMeasureWorld(t)
	defer c.Close()
	m := mpi.Newest()
	type mode struct {
		name string
		poll handoff.IdlePoll // zero: the polling Allreduce
	}
	us := time.Microsecond
	modes := []mode{{"allreduce", handoff.IdlePoll{}}, {"idle 1-8us", handoff.IdlePoll{Min: us, Max: 8 * us}},
		{"idle 2-64us (default)", handoff.IdlePollDefault}, {"idle 16-256us", handoff.IdlePoll{Min: 16 * us, Max: 256 * us}}}
	rounds, calls := envCount(t, "BATCHKIT_IDLE_BENCH_ROUNDS", 15), 8
	for _, n := range []int{1024*1024 + 1024 + 1024*10 + 10, 64*1024 + 1024 + 2} {
		buf := make([]float32, n)
		for _, delay := range []time.Duration{0, 2 * time.Millisecond} {
			wall, cpu := make([][]float64, len(modes)), make([][]float64, len(modes))
			for range rounds {
				for i, md := range modes {
					reduce := collective.Allreduce[float32]
					if md.poll.Min > 0 {
						m.SetIdlePoll(md.poll)
						reduce = collective.AllreduceIdle[float32]
					}
					if err := c.Barrier(); err != nil {
						t.Fatal(err)
					}
					t0, c0 := time.Now(), cpuTime()
					for range calls {
						if c.Rank() == c.Size()-1 && delay > 0 {
							time.Sleep(delay)
						}
						if err := reduce(c, buf, buf, collective.Sum); err != nil {
							t.Fatal(err)
						}
					}
					wall[i] = append(wall[i], float64(time.Since(t0).Microseconds())/float64(calls))
					cpu[i] = append(cpu[i], float64((cpuTime()-c0).Microseconds())/float64(calls))
				}
			}
			m.SetIdlePoll(handoff.IdlePollDefault)
			if c.Rank() != 0 {
				continue
			}
			for i, md := range modes {
				line, _ := json.Marshal(map[string]any{"bytes": 4 * n, "peer_late_us": delay.Microseconds(), "mode": md.name,
					"wall_us": median(wall[i]), "cpu_us": median(cpu[i]), "rounds": rounds})
				fmt.Fprintln(os.Stdout, string(line))
			}
		}
	}
}

// cpuTime is this process's CPU time, user and system, every thread.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
