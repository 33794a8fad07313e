package failfast

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// lockedBuffer is a stderr several goroutines write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// rankResult is one in-process rank's end.
type rankResult struct {
	code   int
	took   time.Duration
	stderr string
}

// runRanks runs one watched `sh -c script` per entry (nil scripts are
// left to the test) and waits for all.
func runRanks(t *testing.T, port int, tokens []string, scripts []string) []rankResult {
	t.Helper()
	res := make([]rankResult, len(scripts))
	var wg sync.WaitGroup
	for r, script := range scripts {
		if script == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := Config{Rank: r, Size: len(scripts), Addr: "127.0.0.1", Port: port, Token: tokens[r],
				Grace: time.Second, JoinTimeout: 2 * time.Second, ExitWait: time.Second}
			var stderr lockedBuffer
			start := time.Now()
			code, err := Run(context.Background(), cfg, exec.Command("sh", "-c", script), nil, &stderr)
			if err != nil {
				t.Errorf("rank %d: %v", r, err)
			}
			res[r] = rankResult{code, time.Since(start), stderr.String()}
		}()
	}
	wg.Wait()
	return res
}

func codes(res []rankResult) []int {
	var c []int
	for _, r := range res {
		c = append(c, r.code)
	}
	return c
}

func same(tok string, n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = tok
	}
	return s
}

func TestRunOneFails(t *testing.T) {
	for _, failing := range []int{0, 1} {
		t.Run("rank "+strconv.Itoa(failing), func(t *testing.T) {
			scripts := []string{"sleep 30", "sleep 30", "sleep 30"}
			scripts[failing] = "sleep 0.3; exit 3"
			res := runRanks(t, freePort(t), same("tok", 3), scripts)
			if diff := cmp.Diff([]int{3, 3, 3}, codes(res)); diff != "" {
				t.Errorf("codes (-want +got):\n%s", diff)
			}
			for r, x := range res {
				want := "batchkit: rank " + strconv.Itoa(failing) + " exited with status 3; stopping this rank"
				if r == failing {
					want = "batchkit: rank " + strconv.Itoa(failing) + " exited with status 3; stopping the other ranks"
				}
				if !strings.Contains(x.stderr, want) {
					t.Errorf("rank %d's stderr %q lacks %q", r, x.stderr, want)
				}
				if x.took > 5*time.Second {
					t.Errorf("rank %d took %v", r, x.took)
				}
			}
		})
	}
}

func TestRunSignalled(t *testing.T) {
	res := runRanks(t, freePort(t), same("tok", 2), []string{"sleep 30", "sleep 0.3; kill -9 $$"})
	if diff := cmp.Diff([]int{137, 137}, codes(res)); diff != "" {
		t.Errorf("codes (-want +got):\n%s", diff)
	}
}

// A stopped child that ignores SIGTERM gets SIGKILL after the grace period.
func TestRunGrace(t *testing.T) {
	res := runRanks(t, freePort(t), same("tok", 2), []string{"trap '' TERM; sleep 30 & wait; wait", "sleep 0.3; exit 4"})
	if diff := cmp.Diff([]int{4, 4}, codes(res)); diff != "" {
		t.Errorf("codes (-want +got):\n%s", diff)
	}
	if res[0].took > 5*time.Second {
		t.Errorf("took %v", res[0].took)
	}
}

func TestRunEarlyExitZero(t *testing.T) {
	res := runRanks(t, freePort(t), same("tok", 3), []string{"sleep 1", "exit 0", "sleep 1"})
	if diff := cmp.Diff([]int{0, 0, 0}, codes(res)); diff != "" {
		t.Errorf("codes (-want +got):\n%s", diff)
	}
	for r, x := range res {
		if x.stderr != "" {
			t.Errorf("rank %d printed %q", r, x.stderr)
		}
		if r != 1 && x.took < time.Second {
			t.Errorf("rank %d took %v: stopped early", r, x.took)
		}
	}
}

// A rank whose wrapper vanishes (killed, its node gone) without a report
// stops the others.
func TestRunPeerVanishes(t *testing.T) {
	port := freePort(t)
	go func() {
		for range 100 {
			c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err == nil {
				if err := dial(c, "tok", 1, 3); err != nil {
					t.Errorf("fake rank 1: %v", err)
				}
				time.Sleep(300 * time.Millisecond)
				c.Close()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	res := runRanks(t, port, same("tok", 3), []string{"sleep 30", "", "sleep 30"})
	if res[0].code != 1 || res[2].code != 1 {
		t.Errorf("codes %d, %d; want 1, 1", res[0].code, res[2].code)
	}
	want := "batchkit: rank 1's batchkit exec vanished; stopping this rank"
	if !strings.Contains(res[2].stderr, want) {
		t.Errorf("rank 2's stderr %q lacks %q", res[2].stderr, want)
	}
}

// A rank with another token is refused and runs unwatched: it neither
// stops the others nor is stopped.
func TestRunWrongToken(t *testing.T) {
	res := runRanks(t, freePort(t), []string{"tok", "other"}, []string{"sleep 1", "sleep 0.2; exit 3"})
	if diff := cmp.Diff([]int{0, 3}, codes(res)); diff != "" {
		t.Errorf("codes (-want +got):\n%s", diff)
	}
	if want := "does not know this job's token"; !strings.Contains(res[1].stderr, want) {
		t.Errorf("rank 1's stderr %q lacks %q", res[1].stderr, want)
	}
	if want := "refused a connection"; !strings.Contains(res[0].stderr, want) {
		t.Errorf("rank 0's stderr %q lacks %q", res[0].stderr, want)
	}
}

// A rank whose program cannot be started stops the others too.
func TestRunNotStarted(t *testing.T) {
	port := freePort(t)
	var stderr lockedBuffer
	var code int
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		cfg := Config{Rank: 1, Size: 2, Addr: "127.0.0.1", Port: port, Token: "tok", Grace: time.Second, JoinTimeout: 2 * time.Second, ExitWait: time.Second}
		code, err = Run(context.Background(), cfg, exec.Command("/nonexistent/prog"), nil, &stderr)
	}()
	res := runRanks(t, port, same("tok", 2), []string{"sleep 30", ""})
	<-done
	if code != 127 || err == nil || res[0].code != 127 {
		t.Errorf("rank 1: %d, %v; rank 0: %d; want 127, an error, 127", code, err, res[0].code)
	}
}

// A wrapper whose child has exited and that waits for ranks that never
// join says why (issue 30, item 17: a rank under Hydra took 10 s longer
// with no word), and a signal meanwhile ends the wait at once.
func TestRunSaysWhyItWaits(t *testing.T) {
	run := func(cfg Config, sigs <-chan os.Signal) rankResult {
		var stderr lockedBuffer
		start := time.Now()
		code, err := Run(context.Background(), cfg, exec.Command("true"), sigs, &stderr)
		if err != nil {
			t.Errorf("rank %d: %v", cfg.Rank, err)
		}
		return rankResult{code, time.Since(start), stderr.String()}
	}
	port := freePort(t)
	cfg := Config{Size: 2, Addr: "127.0.0.1", Port: port, Token: "tok", Grace: time.Second, JoinTimeout: 6 * time.Second, ExitWait: 3 * time.Second}
	t.Run("a peer whose rank 0 never answers", func(t *testing.T) {
		cfg := cfg
		cfg.Rank = 1
		res := run(cfg, nil)
		// Said after SayDelay: the rest of ExitWait, 2s on an idle machine.
		want := regexp.MustCompile(`^batchkit exec: rank 1: the program exited with status 0; waiting up to [12]s to tell rank 0's batchkit exec at 127\.0\.0\.1:` +
			strconv.Itoa(port) + `, which has not answered \(does rank 0 run under batchkit exec\? BATCHKIT_FAIL_FAST=0 turns the watch off\)\n$`)
		if res.code != 0 || !want.MatchString(res.stderr) || res.took < 3*time.Second {
			t.Errorf("code %d after %v, stderr %q; want 0 after 3s, %s", res.code, res.took, res.stderr, want)
		}
	})
	t.Run("rank 0 whose peer never joins, signalled", func(t *testing.T) {
		cfg := cfg
		cfg.Rank = 0
		sigs := make(chan os.Signal, 1)
		time.AfterFunc(2*time.Second, func() { sigs <- syscall.SIGTERM })
		res := run(cfg, sigs)
		want := regexp.MustCompile(`^batchkit exec: rank 0: the program exited with status 0; waiting up to [45]s for rank\(s\) 1 to join, to stop them if one fails \(do they run under batchkit exec\? BATCHKIT_FAIL_FAST=0 turns the watch off\)\n$`)
		if res.code != 0 || !want.MatchString(res.stderr) || res.took > 5*time.Second {
			t.Errorf("code %d after %v, stderr %q; want 0 at the signal (2s, not the join's end at 6s), %s", res.code, res.took, res.stderr, want)
		}
	})
}
