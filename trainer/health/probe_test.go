package health

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/trainer"
)

// slowLink is a rank whose broadcasts as the root take d longer.
type slowLink struct {
	health Comm
	b      Broadcaster
	rank   int
	d      time.Duration
}

func (s slowLink) Broadcast(buf []float32, root int) error {
	if root == s.rank {
		time.Sleep(s.d)
	}
	return s.b.Broadcast(buf, root)
}

// trainReport trains 2 epochs of the digits on 4 in-process ranks (nodes
// node1: 0, 1; node2: 2, 3) with a Probe on each, rank slow's steps
// slowed by d, rank slowLinkRank's broadcasts by ld, and returns rank 0's
// report; bucketBytes is trainer.Config's BucketBytes.
func trainReport(t *testing.T, slow int, d time.Duration, slowLinkRank int, ld time.Duration, bucketBytes int) Report {
	t.Helper()
	d0, err := trainer.Digits()
	if err != nil {
		t.Fatal(err)
	}
	tr, te, err := trainer.Split(d0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 4
	w := trainer.NewLocalWorld(n)
	reps := make([]Report, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if errs[r] != nil {
					w.Abort()
				}
			}()
			p := NewProbe(w.Comms[r], nil)
			// The throttled rank of the test harness sleeps at the start of
			// each step, inside the Probe's step and before any collective,
			// as a rank on a slower or busier core computes longer.
			begin := p.StepBegin
			if r == slow {
				begin = func() { p.StepBegin(); time.Sleep(d) }
			}
			cfg := trainer.Config{Hidden: []int{16}, Epochs: 2, BatchSize: 32, LR: 0.05, Momentum: 0.9, Seed: 1, BucketBytes: bucketBytes,
				OnStepBegin: begin, OnStep: func(si trainer.StepInfo) error { p.StepEnd(si.Exposed); return nil }}
			if _, errs[r] = trainer.Train(p, tr, te, cfg); errs[r] != nil {
				return
			}
			var b Broadcaster = w.Comms[r].(Broadcaster)
			if r == slowLinkRank {
				b = slowLink{w.Comms[r], b, r, ld}
			}
			s := p.Sample()
			s.Node = []string{"node1", "node1", "node2", "node2"}[r]
			if s.LinkGBs, errs[r] = ProbeLinks(w.Comms[r], b, LinkBytes, LinkReps, nil); errs[r] != nil {
				return
			}
			all, err := Gather(w.Comms[r], s)
			if errs[r] = err; err == nil {
				reps[r] = Analyze(all, DefaultThresholds)
			}
		}()
	}
	wg.Wait()
	sameReports(t, errs, reps)
	return reps[0]
}

type named struct {
	Rank   int
	Node   string
	Metric string
}

// outlierNames are rep's outliers of metric.
func outlierNames(rep Report, metric string) []named {
	var got []named
	for _, o := range rep.Outliers {
		if o.Metric == metric {
			got = append(got, named{o.Rank, o.Node, o.Metric})
		}
	}
	return got
}

// TestThrottledRankIsNamed: a rank slowed by 30 ms a step (0.7 s over the
// run, past MinExcess) is named for its compute, and no other rank or
// node; the others waited on it. With gradient buckets too, whose
// allreduces run beside the backward pass: the slow rank's compute still
// counts its sleep (it is not taken for time in collectives).
func TestThrottledRankIsNamed(t *testing.T) {
	for _, tt := range []struct {
		name        string
		bucketBytes int
	}{{"one allreduce", 0}, {"a bucket per layer", 1}} {
		t.Run(tt.name, func(t *testing.T) { throttledRankIsNamed(t, tt.bucketBytes) })
	}
}

func throttledRankIsNamed(t *testing.T, bucketBytes int) {
	const d = 30 * time.Millisecond
	rep := trainReport(t, 2, d, -1, 0, bucketBytes)
	if diff := cmp.Diff([]named{{2, "node2", "compute"}}, outlierNames(rep, "compute")); diff != "" {
		t.Errorf("outliers (-want +got):\n%s\nreport: %+v", diff, rep)
	}
	slow := rep.Ranks[2]
	if slept := float64(slow.Steps) * d.Seconds(); slow.Compute < slept {
		t.Errorf("the slow rank's compute %.3f s, less than its sleep %.3f s", slow.Compute, slept)
	}
	for _, x := range rep.Ranks {
		if x.Steps != slow.Steps || x.Steps < 20 {
			t.Errorf("rank %d: %d steps, rank 2 %d: want the same, at least 20", x.Rank, x.Steps, slow.Steps)
		}
		if x.Rank != 2 && x.Wait < slow.Wait+0.5*float64(x.Steps)*d.Seconds() {
			t.Errorf("rank %d waited %.3f s, the slow rank %.3f s: want at least half its sleep more", x.Rank, x.Wait, slow.Wait)
		}
	}
}

// TestThrottledLinkIsNamed: a rank whose broadcasts take 50 ms longer is
// named for its link, and no other rank.
func TestThrottledLinkIsNamed(t *testing.T) {
	rep := trainReport(t, -1, 0, 3, 50*time.Millisecond, 0)
	if diff := cmp.Diff([]named{{3, "node2", "link"}}, outlierNames(rep, "link")); diff != "" {
		t.Errorf("link outliers (-want +got):\n%s\nreport: %+v", diff, rep)
	}
}

func TestGatherRoundTrip(t *testing.T) {
	long := string(make([]byte, 100))
	in := []Sample{
		{Rank: 0, Node: "node1", Host: "vm", CPUs: []int{0, 31, 32, 1023}, Steps: 7, Compute: 1.25, ComputeStep: 0.125, Wait: 0.5, Comm: 0.125, LinkGBs: 3.5},
		{Rank: 1, Node: long, Host: long, CPUs: []int{1024}, Steps: 7},
		{Rank: 2, Node: "n\u00e9ud-\u00fc"},
	}
	w := trainer.NewLocalWorld(len(in))
	got := make([][]Sample, len(in))
	var wg sync.WaitGroup
	for r := range in {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if got[r], err = Gather(w.Comms[r], in[r]); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	want := append([]Sample(nil), in...)
	want[1].Node, want[1].Host, want[1].CPUs = long[:maxNode], long[:maxNode], nil // CPU 1024 is past maxCPU
	for r := range in {
		if diff := cmp.Diff(want, got[r]); diff != "" {
			t.Errorf("rank %d (-want +got):\n%s", r, diff)
		}
	}
}

// TestEvenRanksNoOutlier: the same run without a throttled rank names
// nobody for compute. (Links between goroutines are copies in memory,
// as noisy as the scheduler of 4 ranks on the test's CPUs: an even link is
// TestAnalyzeOutliers's and integration/health_test.go's.)
func TestEvenRanksNoOutlier(t *testing.T) {
	rep := trainReport(t, -1, 0, -1, 0, 0)
	if got := outlierNames(rep, "compute"); got != nil {
		t.Errorf("outliers %v in an even run: want none\nreport: %+v", got, rep)
	}
}

// A Probe's collectives may come from another goroutine than its step's
// (a trainer that allreduces while it computes): the figures add up, the
// first collective of the step is still the one after the barrier, and
// compute is never negative (run with -race).
func TestProbeConcurrent(t *testing.T) {
	w := trainer.NewLocalWorld(1)
	p := NewProbe(w.Comms[0], nil)
	for range 3 {
		p.StepBegin()
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.AllreduceSum(make([]float32, 8)); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		p.StepEnd(0)
	}
	s := p.Sample()
	if s.Steps != 3 || s.Compute < 0 || !(s.Comm > 0) {
		t.Errorf("sample %+v: want 3 steps, comm measured, compute >= 0", s)
	}
}

// idleOnly counts the calls made beside compute (trainer.IdleComm).
type idleOnly struct {
	trainer.Comm
	idle int
}

func (c *idleOnly) AllreduceSumIdle(buf []float32) error { c.idle++; return c.Comm.AllreduceSum(buf) }

// A Probe passes the gradient buckets' idle calls on as idle calls, and
// times them: without it the buckets under --report would poll a core.
func TestProbeForwardsIdle(t *testing.T) {
	c := &idleOnly{Comm: trainer.NewLocalWorld(1).Comms[0]}
	p := NewProbe(c, nil)
	p.StepBegin()
	if err := trainer.AllreduceSumIdle(p, make([]float32, 8)); err != nil {
		t.Fatal(err)
	}
	p.StepEnd(0)
	if s := p.Sample(); c.idle != 1 || !(s.Comm > 0) {
		t.Errorf("idle calls %d, comm %v: want 1 call, timed", c.idle, s.Comm)
	}
}

// sameReports fails the test on any rank's error, or when a rank's report
// is not rank 0's: every rank analyses the same gathered samples.
func sameReports(t *testing.T, errs []error, reps []Report) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r := 1; r < len(reps); r++ {
		if diff := cmp.Diff(reps[0], reps[r]); diff != "" {
			t.Fatalf("rank %d's report differs from rank 0's:\n%s", r, diff)
		}
	}
}
