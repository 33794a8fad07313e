//go:build linux

package tcp

import (
	"bytes"
	"fmt"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"github.com/batchkit/batchkit/trainer/collective/tcp/internal/tcptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// shmPattern is which of each rank's links are in shared memory:
// "0:1,3" means rank 0 has shared memory to ranks 1 and 3.
func shmPattern(bs []*tcpBackend) string {
	var out []string
	for r, b := range bs {
		var to []string
		for _, p := range b.peers {
			if p != nil && p.shm != nil {
				to = append(to, fmt.Sprint(p.rank))
			}
		}
		out = append(out, fmt.Sprintf("%d:%s", r, strings.Join(to, ",")))
	}
	return strings.Join(out, " ")
}

// TestShmLinks: on one host, exactly the ring neighbours' links are shared
// memory; a rank with it switched off keeps its links on TCP (and says why)
// while the others still use it, and collectives over the mixed links are
// right. No link file is left behind.
func TestShmLinks(t *testing.T) {
	var logs [5]tcptest.Log
	logTo := func(o *Options) { o.Logf = logs[o.Rank].Logf }
	for _, c := range []struct {
		name  string
		n     int
		tweak func(o *Options)
		want  string
	}{
		{"two ranks", 2, nil, "0:1 1:0"},
		{"three ranks", 3, nil, "0:1,2 1:0,2 2:0,1"},
		{"five ranks", 5, nil, "0:1,4 1:0,2 2:1,3 3:2,4 4:0,3"},
		{"rank 1 says no", 4, func(o *Options) { o.NoShm = o.Rank == 1 }, "0:3 1: 2:3 3:0,2"},
		{"rank 0 says no", 3, func(o *Options) { o.NoShm = o.Rank == 0 }, "0: 1:2 2:1"},
		{"off everywhere", 3, func(o *Options) { o.NoShm = true }, "0: 1: 2:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i := range logs {
				logs[i] = tcptest.Log{}
			}
			bs := tcpWorld(t, c.n, withTweaks(c.tweak, logTo))
			if got := shmPattern(bs); got != c.want {
				t.Errorf("shared memory links %q, want %q", got, c.want)
			}
			if left, _ := filepath.Glob(filepath.Join(shmDir, fmt.Sprintf("%s%d-*", shmPrefix, os.Getpid()))); len(left) > 0 {
				t.Errorf("link files left behind: %v", left)
			}
			if c.name == "rank 1 says no" {
				if got := logs[1].Grep("stays on TCP: shared memory is off here"); len(got) != 1 {
					t.Errorf("rank 1 logged %q, want one line saying its link to rank 0 stays on TCP", logs[1].Lines())
				}
			}
			// A ring allreduce and a ring allgather across the mix.
			tcpCheckAllreduce(t, bs, backend.Float64, backend.Sum, 300001, true)
			tcpCheckAllgather(t, bs, backend.Float32, 300001)
		})
	}
}

// TestShmAcceptRefuses: an offer that does not name this user's private
// file holding the offered nonce leaves the link on TCP, with the reason.
func TestShmAcceptRefuses(t *testing.T) {
	f, err := createShm(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer f.remove()
	other := bytes.Repeat([]byte{'x'}, shmNonceSz)
	offer := func(name string, nonce []byte) []byte { return append([]byte(name+"\x00"), nonce...) }

	public := filepath.Join(shmDir, shmPrefix+"test-public")
	if err := os.WriteFile(public, make([]byte, shmSize(4096)), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(public)
	for _, c := range []struct {
		name string
		body []byte
		want string
	}{
		{"no terminator", []byte("batchkit-x"), "malformed offer"},
		{"short nonce", offer(f.name, f.nonce[:5]), "malformed offer"},
		{"missing file", offer(shmPrefix+"no-such-file", f.nonce), "another host (the offered file is not here)"},
		{"not ours", offer("other-file", f.nonce), `refusing the file name "other-file"`},
		{"path", offer(shmPrefix+"../etc/passwd", f.nonce), `refusing the file name "batchkit-../etc/passwd"`},
		{"wrong nonce", offer(f.name, other), "the offered file is not the one rank 3 wrote"},
		{"readable by others", offer(shmPrefix+"test-public", f.nonce), public + ": not private to this user"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, p := &tcpBackend{}, &tcpPeer{rank: 3}
			if got := b.acceptShm(p, c.body); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
			if p.shm != nil {
				t.Errorf("the link went to shared memory")
			}
		})
	}
	t.Run("right", func(t *testing.T) {
		b, p := &tcpBackend{}, &tcpPeer{rank: 3}
		if got := b.acceptShm(p, offer(f.name, f.nonce)); got != "" {
			t.Fatalf("refused: %s", got)
		}
		defer unmapShm(p.shm.mem)
		if len(p.shm.in.data) != 4096 {
			t.Errorf("ring of %d bytes, want 4096", len(p.shm.in.data))
		}
	})
	t.Run("off", func(t *testing.T) {
		b, p := &tcpBackend{o: Options{NoShm: true}}, &tcpPeer{rank: 3}
		if got := b.acceptShm(p, offer(f.name, f.nonce)); got != "shared memory is off here" {
			t.Errorf("got %q", got)
		}
	})
}

// TestShmRing drives both ends of one ring in one goroutine: messages of
// every length from 0 to 3 ring sizes, each starting 8-byte aligned,
// written and read in pieces across the wrap, arrive intact, and the ring
// never reports more room or data than it has.
func TestShmRing(t *testing.T) {
	const ringBytes = 104 // a multiple of 8, not a power of two
	mem := make([]byte, shmSize(ringBytes))
	w := newShmLink(mem, ringBytes, true).out
	r := newShmLink(mem, ringBytes, false).in
	for n := 0; n <= 3*ringBytes; n++ {
		msg := make([]byte, n)
		for i := range msg {
			msg[i] = byte(n*31 + i)
		}
		got := make([]byte, 0, n)
		w.beginMessage()
		r.beginRead()
		if w.pos%8 != 0 || r.pos%8 != 0 || w.pos != r.pos {
			t.Fatalf("message %d starts at writer %d, reader %d", n, w.pos, r.pos)
		}
		rest := msg
		for step := 0; len(got) < n; step++ {
			if step > 10*n {
				t.Fatalf("message %d: stuck with %d of %d bytes read", n, len(got), n)
			}
			// Write up to 13 bytes, read up to 11: the ends chase each
			// other around the ring.
			rest = rest[w.write(rest[:min(len(rest), 13)]):]
			run := r.next(min(11, n-len(got)))
			got = append(got, run...)
			r.consume(len(run))
			if room, avail := w.room(), r.available(); room < 0 || avail < 0 || room+avail != ringBytes {
				t.Fatalf("message %d: room %d + available %d != %d", n, room, avail, ringBytes)
			}
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("message %d: got % x, want % x", n, got, msg)
		}
	}
}

// TestShmFull: when /dev/shm has no room for a link (Docker gives 64 MiB),
// the link stays on TCP, says why, and works; nothing is left in the
// directory. Mounts a 1 MiB tmpfs (root only).
func TestShmFull(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a small tmpfs here (%v): needs root", err)
	}
	defer syscall.Unmount(dir, 0)
	old := shmDir
	shmDir = dir
	defer func() { shmDir = old }()

	var log tcptest.Log
	bs := tcpWorld(t, 2, func(o *Options) { o.Logf = log.Logf })
	if got := shmPattern(bs); got != "0: 1:" {
		t.Errorf("shared memory links %q, want none", got)
	}
	if got := log.Grep("no shared memory for rank 1, staying on TCP: allocate " + dir + "/batchkit-"); len(got) != 1 ||
		!strings.HasSuffix(got[0], ": no space left on device") {
		t.Errorf("log %q, want one line saying the allocation found no space", log.Lines())
	}
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Errorf("left in %s: %v", dir, left)
	}
	tcpCheckAllreduce(t, bs, backend.Float32, backend.Sum, 1<<20, true)
}

// Link files whose creator died before the peer's reply (SIGKILL during
// the rendezvous) are removed by the next process that makes links: only
// this user's, only of dead pids, only older than shmSweepAge.
func TestSweepShm(t *testing.T) {
	dir := t.TempDir()
	old := shmDir
	shmDir = dir
	defer func() { shmDir = old }()

	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadPid := dead.Process.Pid
	now := time.Now()
	files := map[string]struct {
		pid   int
		age   time.Duration
		swept bool
	}{
		"dead creator, old":         {deadPid, 2 * shmSweepAge, true},
		"dead creator, young":       {deadPid, shmSweepAge / 2, false},
		"live creator (pid 1), old": {1, 2 * shmSweepAge, false},
		"this process, old":         {os.Getpid(), 2 * shmSweepAge, false},
	}
	paths := map[string]string{}
	for name, f := range files {
		p := filepath.Join(dir, fmt.Sprintf("%s%d-%x", shmPrefix, f.pid, len(paths)))
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-f.age), now.Add(-f.age)); err != nil {
			t.Fatal(err)
		}
		paths[name] = p
	}
	other := filepath.Join(dir, "not-batchkit-1")
	os.WriteFile(other, nil, 0o600)

	sweepShm(now)
	for name, f := range files {
		_, err := os.Stat(paths[name])
		if gone := os.IsNotExist(err); gone != f.swept {
			t.Errorf("%s: removed %v, want %v", name, gone, f.swept)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a file not of batchkit's was touched: %v", err)
	}
}
