package bench

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/trainer/collective"
)

func TestSchedule(t *testing.T) {
	type sched struct{ Warmup, Iters int }
	for _, tc := range []struct {
		bytes int64
		n     int
		want  sched
	}{
		{8, 0, sched{100, 1000}},
		{64 << 10, 0, sched{100, 1000}},
		{64<<10 + 1, 0, sched{20, 200}},
		{1 << 20, 0, sched{20, 200}},
		{1<<20 + 4, 0, sched{5, 50}},
		{16 << 20, 0, sched{5, 50}},
		{16<<20 + 4, 0, sched{2, 20}},
		{64 << 20, 0, sched{2, 20}},
		// --iters N: warm-up max(1, N/10), whatever the size.
		{8, 1, sched{1, 1}},
		{8, 9, sched{1, 9}},
		{8, 25, sched{2, 25}},
		{64 << 20, 500, sched{50, 500}},
	} {
		w, i := ScheduleIters(tc.bytes, tc.n)
		if diff := cmp.Diff(tc.want, sched{w, i}); diff != "" {
			t.Errorf("ScheduleIters(%d, %d) (-want +got):\n%s", tc.bytes, tc.n, diff)
		}
		if tc.n == 0 {
			if w2, i2 := Schedule(tc.bytes); w2 != w || i2 != i {
				t.Errorf("Schedule(%d) = %d, %d; ScheduleIters with 0 = %d, %d", tc.bytes, w2, i2, w, i)
			}
		}
	}
}

func TestBusFactor(t *testing.T) {
	got := map[string]float64{}
	for _, op := range Collectives {
		for _, n := range []int{1, 2, 4, 8} {
			got[string(op)+"/"+string(rune('0'+n))] = BusFactor(op, n)
		}
	}
	want := map[string]float64{
		"allreduce/1": 1, "allreduce/2": 1, "allreduce/4": 1.5, "allreduce/8": 1.75,
		"broadcast/1": 1, "broadcast/2": 1, "broadcast/4": 1, "broadcast/8": 1,
		"allgather/1": 1, "allgather/2": 0.5, "allgather/4": 0.75, "allgather/8": 0.875,
		"reducescatter/1": 1, "reducescatter/2": 0.5, "reducescatter/4": 0.75, "reducescatter/8": 0.875,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("BusFactor (-want +got):\n%s", diff)
	}
}

func TestBandwidths(t *testing.T) {
	type bw struct{ Alg, Bus float64 }
	for _, tc := range []struct {
		op      Collective
		ranks   int
		bytes   int64
		seconds float64
		want    bw
	}{
		{Allreduce, 4, 1e9, 1, bw{1, 1.5}},
		{Allreduce, 1, 2e6, 1e-3, bw{2, 2}},
		{Allgather, 2, 1e6, 1e-3, bw{1, 0.5}},
		{Broadcast, 8, 4e6, 2e-3, bw{2, 2}},
		{Allreduce, 2, 8, 0, bw{0, 0}},
	} {
		a, b := Bandwidths(tc.op, tc.ranks, tc.bytes, tc.seconds)
		if diff := cmp.Diff(tc.want, bw{a, b}); diff != "" {
			t.Errorf("Bandwidths(%s, %d, %d, %g) (-want +got):\n%s", tc.op, tc.ranks, tc.bytes, tc.seconds, diff)
		}
	}
}

func TestSizes(t *testing.T) {
	full := []int64{}
	for b := int64(8); b <= 64<<20; b *= 2 {
		full = append(full, b)
	}
	for _, tc := range []struct {
		name     string
		op       Collective
		dt       collective.DType
		ranks    int
		min, max int64
		want     []int64
	}{
		{"default sweep", Allreduce, collective.Float32, 2, 8, 64 << 20, full},
		{"one size", Broadcast, collective.Float32, 2, 1024, 1024, []int64{1024}},
		{"max not on the doubling", Allreduce, collective.Float32, 2, 8, 100, []int64{8, 16, 32, 64}},
		{"rounded up to elements", Allreduce, collective.Float32, 2, 10, 100, []int64{12, 20, 40, 80}},
		{"never below min (issue 24)", Allreduce, collective.Float32, 2, 6, 64, []int64{8, 12, 24, 48}},
		{"float64 skips 4 bytes", Allreduce, collective.Float64, 1, 4, 32, []int64{8, 16, 32}},
		{"allgather 3 ranks", Allgather, collective.Float32, 3, 8, 1024, []int64{12, 24, 36, 72, 132, 264, 516}},
		{"reducescatter float64 2 ranks", ReduceScatter, collective.Float64, 2, 8, 64, []int64{16, 32, 64}},
		{"below one element", Allreduce, collective.Float32, 2, 3, 5, []int64{4}},
		{"below one element, float64", Allreduce, collective.Float64, 2, 6, 7, nil},
		{"below one element, 1 byte", Allreduce, collective.Float32, 2, 1, 3, nil},
		{"nothing fits", Allgather, collective.Float32, 4, 8, 8, nil},
		{"min above max", Allreduce, collective.Float32, 1, 16, 8, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Sizes(tc.op, tc.dt, tc.ranks, tc.min, tc.max)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string
	}{
		{in: "8", want: 8},
		{in: "8B", want: 8},
		{in: "1K", want: 1024},
		{in: "1k", want: 1024},
		{in: "4KiB", want: 4096},
		{in: "64KB", want: 64 << 10},
		{in: "64MiB", want: 64 << 20},
		{in: "64M", want: 64 << 20},
		{in: "2 GiB", want: 2 << 30},
		{in: "1g", want: 1 << 30},
		{in: "0", want: 0},
		{in: "", err: `"" is not a size`},
		{in: "MiB", err: `"MiB" is not a size`},
		{in: "-8", err: `"-8" is not a size`},
		{in: "1.5M", err: `unknown unit ".5M"`},
		{in: "8TiB", err: `unknown unit "TiB"`},
		{in: "99999999999999999999", err: "value out of range"},
		{in: "9999999999999G", err: "too large"},
	} {
		got, err := ParseSize(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseSize(%q) = %d, %v; want an error containing %q", tc.in, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestParseClosedSets(t *testing.T) {
	for _, s := range []string{"allreduce", "broadcast", "allgather", "reducescatter"} {
		if op, err := ParseCollective(s); err != nil || string(op) != s {
			t.Errorf("ParseCollective(%q) = %q, %v", s, op, err)
		}
	}
	for in, want := range map[string]string{
		"reduce":  `unknown op "reduce": want one of allreduce, broadcast, allgather, reducescatter`,
		"float16": `unknown dtype "float16": want one of float32, float64`,
		"yaml":    `unknown format "yaml": want one of text, json`,
	} {
		var err error
		switch in {
		case "reduce":
			_, err = ParseCollective(in)
		case "float16":
			_, err = ParseDType(in)
		default:
			_, err = ParseFormat(in)
		}
		if err == nil || err.Error() != want {
			t.Errorf("parsing %q: %v, want %q", in, err, want)
		}
	}
	if dt, err := ParseDType("float64"); err != nil || dt != collective.Float64 {
		t.Errorf("ParseDType(float64) = %v, %v", dt, err)
	}
}

func TestBufferBytes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		op       Collective
		dt       collective.DType
		ranks    int
		min, max int64
		want     int64
	}{
		{"allreduce: send and receive", Allreduce, collective.Float32, 2, 8, 64 << 20, 128 << 20},
		{"broadcast: in place", Broadcast, collective.Float32, 4, 8, 1 << 20, 1 << 20},
		{"allgather: a block and the whole", Allgather, collective.Float32, 4, 8, 1 << 20, 1<<20 + 1<<18},
		{"reducescatter: the whole and a block", ReduceScatter, collective.Float64, 2, 8, 1 << 20, 1<<20 + 1<<19},
		{"largest size of the sweep, not max", Allreduce, collective.Float32, 2, 8, 100, 128},
		{"empty sweep", Allgather, collective.Float32, 4, 8, 8, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := BufferBytes(tc.op, tc.dt, tc.ranks, tc.min, tc.max); got != tc.want {
				t.Errorf("BufferBytes = %d, want %d", got, tc.want)
			}
		})
	}
}
