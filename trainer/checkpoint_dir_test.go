package trainer

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// smallCheckpoint is a valid checkpoint of step with n parameters.
func smallCheckpoint(step, n int) *Checkpoint {
	ck := &Checkpoint{Header: CheckpointHeader{GlobalStep: step, WorldSize: 1, BatchSize: 1, Epochs: 1},
		Params: make([]float32, n), Momentum: make([]float32, n)}
	for i := range ck.Params {
		ck.Params[i] = float32(step) + float32(i)
	}
	return ck
}

func encoded(t *testing.T, ck *Checkpoint) []byte {
	t.Helper()
	b, err := ck.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// otherVersion is a checkpoint of step in format version v, checksum and
// all: whole, but not one this batchkit reads.
func otherVersion(t *testing.T, step int, v uint32) []byte {
	b := encoded(t, smallCheckpoint(step, 4))
	body := b[:len(b)-sha256.Size]
	binary.LittleEndian.PutUint32(body[len(checkpointMagic):], v)
	sum := sha256.Sum256(body)
	return append(body, sum[:]...)
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// collect is a Warn that keeps the warnings' texts.
type collect struct {
	mu  sync.Mutex
	msg []string
}

func (c *collect) warn(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msg = append(c.msg, err.Error())
}

func (c *collect) naming(s string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.msg {
		if strings.Contains(m, s) {
			out = append(out, m)
		}
	}
	return out
}

// steps is the steps of the checkpoints in dir that decode, highest first.
func steps(t *testing.T, dir string) []int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var s []int
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if ck, err := DecodeCheckpoint(b); err == nil && e.Name() == checkpointName(ck.Header.GlobalStep) {
			s = append(s, ck.Header.GlobalStep)
		}
	}
	slices.Sort(s)
	slices.Reverse(s)
	return s
}

// Files named as checkpoints of high steps that hold junk, a checkpoint of
// another format version or a damaged one never count among the kept
// checkpoints and are never deleted: every checkpoint written is there
// after SaveCheckpoint returns its name, the newest 3 stay, and resume
// takes the newest readable one, naming each of the others once.
func TestPruneIgnoresUnreadable(t *testing.T) {
	dir := t.TempDir()
	damaged := encoded(t, smallCheckpoint(9000000003, 8))
	damaged[len(damaged)/2] ^= 1
	junk := map[string][]byte{
		"ckpt-9000000001.bkpt": []byte("not a checkpoint\n"),
		"ckpt-9000000002.bkpt": bytes.Repeat([]byte{0}, 100),
		"ckpt-9000000003.bkpt": damaged,
		"ckpt-9000000004.bkpt": otherVersion(t, 9000000004, CheckpointVersion+1),
		"ckpt-9000000005.bkpt": nil, // empty
	}
	for name, b := range junk {
		writeFile(t, filepath.Join(dir, name), b)
	}
	for step := 10; step <= 60; step += 10 {
		path, err := SaveCheckpoint(dir, smallCheckpoint(step, 8))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("step %d: SaveCheckpoint returned %s, which is gone: %v", step, path, err)
		}
	}
	if got := steps(t, dir); !slices.Equal(got, []int{60, 50, 40}) {
		t.Errorf("readable checkpoints %v, want [60 50 40]", got)
	}
	for name, b := range junk {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s: %v, changed: %v; want it left alone", name, err, !bytes.Equal(got, b))
		}
	}
	var w collect
	ck, path, err := LoadLatestCheckpoint(dir, w.warn)
	if err != nil || ck == nil || ck.Header.GlobalStep != 60 || path != filepath.Join(dir, checkpointName(60)) {
		t.Fatalf("resumed from %v (%s), %v; want step 60", ck != nil, path, err)
	}
	for name, why := range map[string]string{
		"ckpt-9000000001.bkpt": "not a batchkit checkpoint",
		"ckpt-9000000002.bkpt": "not a batchkit checkpoint",
		"ckpt-9000000003.bkpt": "checksum",
		"ckpt-9000000004.bkpt": fmt.Sprintf("format version %d", CheckpointVersion+1),
		"ckpt-9000000005.bkpt": "not a batchkit checkpoint",
	} {
		if got := w.naming(name); len(got) != 1 || !strings.Contains(got[0], why) {
			t.Errorf("warnings naming %s: %q, want one saying %q", name, got, why)
		}
	}
	if len(w.msg) != len(junk) {
		t.Errorf("warnings %q, want one for each of the %d junk files", w.msg, len(junk))
	}
}

// A checkpoint name is "ckpt-", 1 to 19 ASCII digits that fit an int, and
// ".bkpt": no sign, no space, no other digits.
func TestCheckpointNamesStrict(t *testing.T) {
	for name, want := range map[string]int{
		"ckpt-0000000042.bkpt":              42,
		"ckpt-42.bkpt":                      42,
		"ckpt-0.bkpt":                       0,
		"ckpt-9223372036854775807.bkpt":     math.MaxInt64,
		"ckpt-+7000.bkpt":                   -1,
		"ckpt--7000.bkpt":                   -1,
		"ckpt-.bkpt":                        -1,
		"ckpt- 7000.bkpt":                   -1,
		"ckpt-7000 .bkpt":                   -1,
		"ckpt-0x1f.bkpt":                    -1,
		"ckpt-1_000.bkpt":                   -1,
		"ckpt-٣.bkpt":                       -1,
		"ckpt-9223372036854775808.bkpt":     -1, // overflows
		"ckpt-00000000000000000000042.bkpt": -1, // 23 digits
		"ckpt-42.bkpt.tmp":                  -1,
		"ckpt-42.BKPT":                      -1,
		"xckpt-42.bkpt":                     -1,
		".ckpt-42.bkpt":                     -1,
	} {
		if got := checkpointStep(name); got != want {
			t.Errorf("checkpointStep(%q) = %d, want %d", name, got, want)
		}
	}
}

// ckpt-+7000.bkpt, though a valid checkpoint of step 7000, is not one by
// name: resume does not take it and says so, and pruning leaves it.
func TestResumeIgnoresMisnamed(t *testing.T) {
	dir := t.TempDir()
	misnamed := filepath.Join(dir, "ckpt-+7000.bkpt")
	writeFile(t, misnamed, encoded(t, smallCheckpoint(7000, 8)))
	for _, step := range []int{10, 20} {
		if _, err := SaveCheckpoint(dir, smallCheckpoint(step, 8)); err != nil {
			t.Fatal(err)
		}
	}
	var w collect
	ck, _, err := LoadLatestCheckpoint(dir, w.warn)
	if err != nil || ck == nil || ck.Header.GlobalStep != 20 {
		t.Fatalf("resumed from %+v, %v; want step 20", ck, err)
	}
	if got := w.naming(misnamed); len(got) != 1 || !strings.Contains(got[0], "not a checkpoint name") {
		t.Errorf("warnings %q, want one naming %s as no checkpoint name", w.msg, misnamed)
	}
	for _, step := range []int{30, 40, 50} {
		if _, err := SaveCheckpoint(dir, smallCheckpoint(step, 8)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(misnamed); err != nil {
		t.Errorf("%s was removed: %v", misnamed, err)
	}
}

// A symbolic link as the newest checkpoint (to a valid one, to junk,
// dangling) is reported, not followed and not silently skipped; pruning
// leaves it and what it points to alone.
func TestResumeReportsSymlink(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target func(t *testing.T, dir string) string
	}{
		{"to a checkpoint", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "elsewhere.bkpt")
			writeFile(t, p, encoded(t, smallCheckpoint(50, 8)))
			return p
		}},
		{"to junk", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "junk")
			writeFile(t, p, []byte("junk"))
			return p
		}},
		{"dangling", func(t *testing.T, dir string) string { return filepath.Join(dir, "nothing") }},
		{"to /dev/zero", func(*testing.T, string) string { return "/dev/zero" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, step := range []int{10, 20, 30} {
				if _, err := SaveCheckpoint(dir, smallCheckpoint(step, 8)); err != nil {
					t.Fatal(err)
				}
			}
			target := tc.target(t, t.TempDir())
			link := filepath.Join(dir, checkpointName(50))
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			var w collect
			ck, _, err := LoadLatestCheckpoint(dir, w.warn)
			if err != nil || ck == nil || ck.Header.GlobalStep != 30 {
				t.Fatalf("resumed from %+v, %v; want step 30", ck, err)
			}
			if got := w.naming(link); len(got) != 1 || !strings.Contains(got[0], "symbolic link") || !strings.Contains(got[0], "not followed") {
				t.Errorf("warnings %q, want one naming %s as a symbolic link not followed", w.msg, link)
			}
			for _, step := range []int{40, 45} {
				if _, err := SaveCheckpoint(dir, smallCheckpoint(step, 8)); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := os.Readlink(link); err != nil || got != target {
				t.Errorf("link %s: %q, %v; want it left pointing to %s", link, got, err, target)
			}
			if got := steps(t, dir); !slices.Equal(got, []int{45, 40, 30}) {
				t.Errorf("checkpoints %v, want [45 40 30]", got)
			}
		})
	}
}

// FIFOs and directories with checkpoint names: resume neither blocks on
// nor takes them, it names each newer than the checkpoint it takes; a run's
// pruning names the others, each once in all, and removes none.
func TestResumeSkipsNonRegular(t *testing.T) {
	dir := t.TempDir()
	for _, step := range []int{10, 20} {
		if _, err := SaveCheckpoint(dir, smallCheckpoint(step, 8)); err != nil {
			t.Fatal(err)
		}
	}
	fifos := []string{"ckpt-5.bkpt", "ckpt-95.bkpt", checkpointName(97)}
	dirs := []string{"ckpt-6.bkpt", "ckpt-96.bkpt", checkpointName(98)}
	for _, n := range fifos {
		if err := syscall.Mkfifo(filepath.Join(dir, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range dirs {
		if err := os.Mkdir(filepath.Join(dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var w collect
	d := newCheckpointDir(dir, w.warn)
	done := make(chan struct{})
	var (
		ck  *Checkpoint
		err error
	)
	go func() {
		defer close(done)
		ck, _, err = d.loadLatest()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("loadLatest still running after 10 s (blocked on a FIFO?)")
	}
	if err != nil || ck == nil || ck.Header.GlobalStep != 20 {
		t.Fatalf("resumed from %+v, %v; want step 20", ck, err)
	}
	if len(w.msg) != 4 {
		t.Errorf("warnings at resume %q, want the 4 newer than step 20", w.msg)
	}
	for _, step := range []int{30, 40, 50} {
		if _, err := d.save(smallCheckpoint(step, 8)); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range fifos {
		if got := w.naming(filepath.Join(dir, n)); len(got) != 1 || !strings.Contains(got[0], "FIFO") {
			t.Errorf("warnings naming %s: %q, want one saying FIFO", n, got)
		}
	}
	for _, n := range dirs {
		if got := w.naming(filepath.Join(dir, n)); len(got) != 1 || !strings.Contains(got[0], "directory") {
			t.Errorf("warnings naming %s: %q, want one saying directory", n, got)
		}
	}
	for _, n := range append(slices.Clone(fifos), dirs...) {
		if _, err := os.Lstat(filepath.Join(dir, n)); err != nil {
			t.Errorf("%s was removed: %v", n, err)
		}
	}
	if got := steps(t, dir); !slices.Equal(got, []int{50, 40, 30}) {
		t.Errorf("checkpoints %v, want [50 40 30]", got)
	}
}

// A directory in the way of the checkpoint being written: the error names
// it, and nothing else is touched.
func TestSaveDirectoryInTheWay(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, checkpointName(10))
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := SaveCheckpoint(dir, smallCheckpoint(10, 8))
	if err == nil || !strings.Contains(err.Error(), in) || !strings.Contains(err.Error(), "directory") {
		t.Errorf("SaveCheckpoint over a directory: %v, want an error naming %s as a directory", err, in)
	}
	if fi, err := os.Lstat(in); err != nil || !fi.IsDir() {
		t.Errorf("%s: %v, want the directory left", in, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d entries in %s, want the directory alone (no temporary file left)", len(ents), dir)
	}
}

// Two writers in one directory at once (no lock: SaveCheckpoint alone)
// never remove each other's temporary files: neither fails.
func TestConcurrentSavesKeepEachOthersTempFiles(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				if _, err := SaveCheckpoint(dir, smallCheckpoint(w*1000+i, 1<<14)); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, ".*")); len(tmps) != 0 {
		t.Errorf("temporary files left: %v", tmps)
	}
}

// verifyCheckpoint, which pruning reads files with in constant memory,
// says what DecodeCheckpoint says of every truncation, every flipped byte,
// another version, a header that overruns the file and bytes appended.
func TestVerifyCheckpointAgreesWithDecode(t *testing.T) {
	good := encoded(t, smallCheckpoint(7, 5))
	overrun := slices.Clone(good)
	binary.LittleEndian.PutUint32(overrun[len(checkpointMagic)+4:], 1<<30)
	inputs := [][]byte{good, otherVersion(t, 7, 9), append(slices.Clone(good), 0), resum(overrun)}
	for i := range good {
		inputs = append(inputs, good[:i])
		flipped := slices.Clone(good)
		flipped[i] ^= 0x10
		inputs = append(inputs, flipped, resum(flipped))
	}
	for _, b := range inputs {
		_, derr := DecodeCheckpoint(b)
		verr := verifyCheckpoint(bytes.NewReader(b), int64(len(b)))
		if fmt.Sprint(derr) != fmt.Sprint(verr) {
			t.Errorf("%d bytes: DecodeCheckpoint says %v, verifyCheckpoint %v", len(b), derr, verr)
		}
	}
}

// resum is b with its checksum made right again.
func resum(b []byte) []byte {
	body := b[:len(b)-sha256.Size]
	sum := sha256.Sum256(body)
	return append(slices.Clone(body), sum[:]...)
}
