package bench

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/topology"
	"github.com/batchkit/batchkit/trainer/collective"
)

func TestCheckMemory(t *testing.T) {
	const gib = int64(1) << 30
	allreduce := Options{Op: Allreduce, DType: collective.Float32, MinBytes: 8, MaxBytes: 8 * gib}
	for _, tc := range []struct {
		name        string
		opts        Options
		world, here int
		avail       int64
		want        string // "" = accepted
	}{
		{"fits", allreduce, 2, 1, 20 * gib, ""},
		{"fits exactly", allreduce, 2, 1, 16 * gib, ""},
		{"one rank too big", allreduce, 1, 1, 15 * gib,
			"the allreduce buffers take 16 GiB per rank, and this node has 15 GiB available"},
		{"the node's ranks share it", allreduce, 4, 2, 20 * gib,
			"the allreduce buffers take 16 GiB per rank, 32 GiB for the 2 ranks on this node, and this node has 20 GiB available"},
		{"unknown memory: no check", allreduce, 2, 2, 0, ""},
		{"broadcast needs one buffer", Options{Op: Broadcast, DType: collective.Float32, MinBytes: 8, MaxBytes: 8 * gib}, 2, 2, 16 * gib, ""},
		{"empty sweep: no check", Options{Op: Allgather, DType: collective.Float32, MinBytes: 8, MaxBytes: 8}, 4, 4, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo := topology.Topology{WorldSize: tc.world, LocalWorldSize: tc.here}
			got := ""
			if err := CheckMemory(tc.opts, topo, tc.avail); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("CheckMemory = %q\n want %q", got, tc.want)
			}
		})
	}
}

// Config.Options: the defaults are a run of allreduce over float32 from 8 B
// to 64 MiB; each bad flag is named.
func TestConfigOptions(t *testing.T) {
	with := func(f func(*Config)) Config { c := Defaults; f(&c); return c }
	for _, tc := range []struct {
		name    string
		cfg     Config
		want    Options
		wantErr string
	}{
		{"defaults", Defaults, Options{Op: Allreduce, DType: collective.Float32, MinBytes: DefaultMinBytes, MaxBytes: DefaultMaxBytes, Format: Text}, ""},
		{"iters", with(func(c *Config) { c.Iters, c.ItersSet = 5, true }),
			Options{Op: Allreduce, DType: collective.Float32, MinBytes: DefaultMinBytes, MaxBytes: DefaultMaxBytes, Iters: 5, Format: Text}, ""},
		{"bad op", with(func(c *Config) { c.Op = "gather" }), Options{}, `invalid --op "gather": want one of allreduce, broadcast, allgather, reducescatter`},
		{"bad dtype", with(func(c *Config) { c.DType = "int8" }), Options{}, `invalid --dtype "int8": want float32 or float64`},
		{"zero min", with(func(c *Config) { c.MinBytes = "0" }), Options{}, "invalid --min-bytes 0: must be at least 1 byte"},
		{"max below min", with(func(c *Config) { c.MinBytes, c.MaxBytes = "1K", "8" }), Options{}, "invalid --max-bytes 8: smaller than --min-bytes 1K"},
		{"iters 0", with(func(c *Config) { c.ItersSet = true }), Options{}, "invalid --iters 0: must be at least 1"},
		{"no timeout", with(func(c *Config) { c.Timeout = 0 }), Options{}, "invalid --timeout 0s: must be positive"},
		{"no rendezvous", with(func(c *Config) { c.RendezvousTimeout = -time.Second }), Options{}, "invalid --rendezvous-timeout -1s: must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := tc.cfg.Options(Text)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Options() error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Options() (-want +got):\n%s", diff)
			}
		})
	}
}
