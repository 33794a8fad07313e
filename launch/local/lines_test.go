package local

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// chunkedWrite writes s to w in pieces of random size, as a pipe delivers it.
func chunkedWrite(w *lineWriter, s string, rng *rand.Rand) {
	for len(s) > 0 {
		n := 1 + rng.IntN(min(len(s), 300))
		w.Write([]byte(s[:n]))
		s = s[n:]
	}
}

// Many writers, many lines, random chunking: every output line is whole and
// carries its writer's prefix; every line arrives once, in order per writer.
func TestLineWriterConcurrent(t *testing.T) {
	const writers, lines = 8, 2000
	var mu sync.Mutex
	var dst, tee bytes.Buffer
	var wg sync.WaitGroup
	for id := range writers {
		lw := newLineWriter(&mu, &dst, Prefix(id, false), &tee)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(id), 1))
			var b strings.Builder
			for i := range lines {
				fmt.Fprintf(&b, "writer %d line %d %s\n", id, i, strings.Repeat("x", rng.IntN(200)))
			}
			chunkedWrite(lw, b.String(), rng)
			lw.Flush()
		})
	}
	wg.Wait()

	re := regexp.MustCompile(`^\[(\d+)\] writer (\d+) line (\d+) x*$`)
	next := make([]int, writers)
	for _, line := range strings.Split(strings.TrimSuffix(dst.String(), "\n"), "\n") {
		m := re.FindStringSubmatch(line)
		if m == nil || m[1] != m[2] {
			t.Fatalf("mangled line %q", line)
		}
		id, _ := strconv.Atoi(m[1])
		if i, _ := strconv.Atoi(m[3]); i != next[id] {
			t.Fatalf("writer %d: line %d, want %d", id, i, next[id])
		}
		next[id]++
	}
	for id, n := range next {
		if n != lines {
			t.Errorf("writer %d: %d lines, want %d", id, n, lines)
		}
	}
	if got, want := strings.Count(tee.String(), "\n"), writers*lines; got != want {
		t.Errorf("tee has %d lines, want %d", got, want)
	}
	if strings.Contains(tee.String(), "[") {
		t.Errorf("tee lines are prefixed")
	}
}

func TestLineWriter(t *testing.T) {
	long := strings.Repeat("a", maxLine)
	tests := []struct {
		name     string
		in       []string // successive writes
		out, tee string
		color    bool
	}{
		{name: "whole lines", in: []string{"a\nb\n"}, out: "[2] a\n[2] b\n", tee: "a\nb\n"},
		{name: "split line", in: []string{"he", "llo\nwor", "ld\n"}, out: "[2] hello\n[2] world\n", tee: "hello\nworld\n"},
		{name: "partial final line", in: []string{"a\nno newline"}, out: "[2] a\n[2] no newline\n", tee: "a\nno newline\n"},
		{name: "empty lines", in: []string{"\n\n"}, out: "[2] \n[2] \n", tee: "\n\n"},
		{name: "nothing", in: nil, out: "", tee: ""},
		{name: "colour", in: []string{"a\n"}, color: true, out: "\x1b[32m[2]\x1b[0m a\n", tee: "a\n"},
		{name: "line of maxLine", in: []string{long + "\n"}, out: "[2] " + long + "\n", tee: long + "\n"},
		{name: "overlong line is cut", in: []string{long, "bc\n"}, out: "[2] " + long + "\n[2] bc\n", tee: long + "\nbc\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var out, tee bytes.Buffer
			w := newLineWriter(&mu, &out, Prefix(2, tt.color), &tee)
			for _, s := range tt.in {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			w.Flush()
			if diff := cmp.Diff(tt.out, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.tee, tee.String()); diff != "" {
				t.Errorf("tee (-want +got):\n%s", diff)
			}
		})
	}
}

// Writes land only when a line is complete.
func TestLineWriterHoldsPartialLine(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	w := newLineWriter(&mu, &out, "[0] ", nil)
	w.Write([]byte("abc"))
	if out.Len() != 0 {
		t.Fatalf("partial line written early: %q", out.String())
	}
	w.Write([]byte("d\ne"))
	if got := out.String(); got != "[0] abcd\n" {
		t.Fatalf("got %q", got)
	}
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		in    string
		state byte
		pgid  int
		ok    bool
	}{
		{"123 (sh) S 1 123 123 0 -1", 'S', 123, true},
		{"124 (a (b) c) Z 1 99 99 0", 'Z', 99, true},
		{"garbage", 0, 0, false},
		{"1 (x) R 0", 0, 0, false},
	}
	for _, tt := range tests {
		state, pgid, ok := parseStat([]byte(tt.in))
		if state != tt.state || pgid != tt.pgid || ok != tt.ok {
			t.Errorf("parseStat(%q) = %q, %d, %v; want %q, %d, %v", tt.in, state, pgid, ok, tt.state, tt.pgid, tt.ok)
		}
	}
}
