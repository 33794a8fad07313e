package trainer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchkit/batchkit/trainer/dirlock"
)

// A second run on a checkpoint directory in use is refused before its
// first step, naming the host and PID of the run that holds it; all its
// ranks return at once. The first run ends as if alone, and its lock file
// is gone after it.
func TestTrainRefusesBusyCheckpointDir(t *testing.T) {
	train, test := digitsSplit(t)
	cfg := defaults()
	cfg.Epochs = 1
	want, _ := reference(t, 1, cfg, train, test)
	host, _ := os.Hostname()
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d ranks", n), func(t *testing.T) {
			cfg := cfg
			cfg.CheckpointDir, cfg.CheckpointEvery = t.TempDir(), 5
			held, release := make(chan struct{}), make(chan struct{})
			first := cfg
			first.OnStep = func(s StepInfo) error {
				if s.GlobalStep == 1 {
					close(held)
					<-release
				}
				return nil
			}
			var (
				res  []Result
				errs []error
			)
			done := make(chan struct{})
			go func() {
				defer close(done)
				res, errs = trainWorld(1, train, test, func(int) Config { return first })
			}()
			select {
			case <-held:
			case <-done:
				t.Fatalf("first run ended before its first step: %v", errs)
			}
			second := cfg
			steps := 0
			second.OnStep = func(StepInfo) error { steps++; return nil }
			start := time.Now()
			_, errs2 := trainWorld(n, train, test, func(int) Config { return second })
			close(release)
			<-done
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("the refused run took %v", took)
			}
			if steps != 0 {
				t.Errorf("the second run trained %d steps, want none", steps)
			}
			msg := fmt.Sprint(errs2[0])
			for _, s := range []string{"checkpoint directory " + cfg.CheckpointDir + " is in use", "host " + host, fmt.Sprintf("pid %d", os.Getpid())} {
				if !strings.Contains(msg, s) {
					t.Errorf("second run's rank 0: %q, want it to say %q", msg, s)
				}
			}
			for r := 1; r < n; r++ {
				if errs2[r] == nil || !strings.Contains(errs2[r].Error(), cfg.CheckpointDir) {
					t.Errorf("second run's rank %d: %v, want an error naming the directory", r, errs2[r])
				}
			}
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("first run: %v", err)
			}
			if WeightsSHA256(res[0].Params) != want {
				t.Errorf("first run's weights differ from an undisturbed run's")
			}
			if _, err := os.Lstat(filepath.Join(cfg.CheckpointDir, ".batchkit.lock")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("lock file after the run: %v, want none", err)
			}
		})
	}
}

// The lock is released however Train returns: at the end, preempted, on an
// error; a lock file a dead run left is taken over with one warning.
func TestTrainReleasesLock(t *testing.T) {
	train, test := digitsSplit(t)
	for _, tc := range []struct {
		name string
		set  func(*Config)
		ok   func(error) bool
	}{
		{"end", func(*Config) {}, func(err error) bool { return err == nil }},
		{"preempted", func(c *Config) { c.Stop = func() StopReason { return Preempt } }, func(err error) bool {
			var pe *PreemptedError
			return errors.As(err, &pe)
		}},
		{"error", func(c *Config) {
			c.OnStep = func(s StepInfo) error {
				if s.GlobalStep == 3 {
					return errCrash
				}
				return nil
			}
		}, func(err error) bool { return errors.Is(err, errCrash) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaults()
			cfg.Epochs = 1
			cfg.CheckpointDir = t.TempDir()
			tc.set(&cfg)
			_, errs := trainWorld(2, train, test, func(int) Config { return cfg })
			if !tc.ok(errs[0]) {
				t.Fatalf("rank 0: %v", errs[0])
			}
			if _, err := os.Lstat(filepath.Join(cfg.CheckpointDir, dirlock.FileName)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("lock file: %v, want none", err)
			}
		})
	}
	t.Run("left by a dead run", func(t *testing.T) {
		cfg := defaults()
		cfg.Epochs = 1
		cfg.CheckpointDir = t.TempDir()
		writeFile(t, filepath.Join(cfg.CheckpointDir, dirlock.FileName), []byte(`{"host":"node7","pid":1234,"job_id":"567","since":"2026-03-04T05:06:07Z"}`+"\n"))
		var w collect
		cfg.Warn = w.warn
		if _, errs := trainWorld(1, train, test, func(int) Config { return cfg }); errs[0] != nil {
			t.Fatal(errs[0])
		}
		if len(w.msg) != 1 || !strings.Contains(w.msg[0], "took over the lock of host node7 pid 1234 (job 567)") {
			t.Errorf("warnings %q, want one about the lock taken over", w.msg)
		}
	})
}
