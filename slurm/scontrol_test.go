package slurm

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// requireOrSkip skips the test for reason, unless BATCHKIT_REQUIRE_CLUSTER=1
// (set by CI), where a missing Slurm must fail loudly instead of letting the
// comparison against the real thing silently disappear.
func requireOrSkip(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv("BATCHKIT_REQUIRE_CLUSTER") == "1" {
		t.Fatalf("BATCHKIT_REQUIRE_CLUSTER=1 and %s", reason)
	}
	t.Skip(reason)
}

// scontrol runs the real `scontrol show ...` as a reference.
type scontrol struct {
	path string
	env  []string
}

type scontrolResult struct {
	stdout, stderr string
	err            error
}

// rejected reports whether scontrol refused the expression. It reports
// errors on stderr but exits 0, and for a bad range inside the first of
// three or more bracket groups it logs the error and carries on.
func (r scontrolResult) rejected() bool {
	return r.err != nil || r.stderr != ""
}

func (r scontrolResult) lines() []string {
	if r.stdout == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
}

// newScontrol finds scontrol and makes sure it can run. `scontrol show
// hostnames` needs no daemon, but it does need some slurm.conf: when the
// machine has none, a two-line one in a temporary directory, named by
// SLURM_CONF, is enough.
func newScontrol(t *testing.T) *scontrol {
	t.Helper()
	path, err := exec.LookPath("scontrol")
	if err != nil {
		requireOrSkip(t, "scontrol is not in PATH, cannot compare against Slurm")
	}
	var env []string
	for _, kv := range os.Environ() {
		// Without an argument scontrol would read SLURM_JOB_NODELIST.
		if !strings.HasPrefix(kv, "SLURM_JOB_NODELIST=") {
			env = append(env, kv)
		}
	}
	// Stop getopt from taking an expression like "-n1" for an option.
	env = append(env, "POSIXLY_CORRECT=1")
	s := &scontrol{path: path, env: env}
	probe := s.run("hostnames", "n[1-2]")
	if probe.err == nil && probe.stdout == "n1\nn2\n" {
		return s
	}
	conf := filepath.Join(t.TempDir(), "slurm.conf")
	if err := os.WriteFile(conf, []byte("ClusterName=batchkit-test\nSlurmctldHost=localhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.env = append(s.env, "SLURM_CONF="+conf)
	retry := s.run("hostnames", "n[1-2]")
	if retry.err != nil || retry.stdout != "n1\nn2\n" {
		requireOrSkip(t, fmt.Sprintf("scontrol cannot run, even with a minimal SLURM_CONF: as is: %v %q; with %s: %v %q",
			probe.err, probe.stderr, conf, retry.err, retry.stderr))
	}
	return s
}

func (s *scontrol) run(what, arg string) scontrolResult {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.path, "show", what, arg)
	cmd.Env = s.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return scontrolResult{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// runAll runs `scontrol show what arg` for every arg, a few at a time.
func (s *scontrol) runAll(what string, args []string) []scontrolResult {
	res := make([]scontrolResult, len(args))
	var wg sync.WaitGroup
	next := make(chan int)
	for range 2 * runtime.NumCPU() {
		wg.Go(func() {
			for i := range next {
				res[i] = s.run(what, args[i])
			}
		})
	}
	for i := range args {
		next <- i
	}
	close(next)
	wg.Wait()
	return res
}

// TestExpandMatchesScontrol compares ExpandHostlist with
// `scontrol show hostnames` on generated valid expressions, which must give
// identical host lists, and on mutated ones: whatever scontrol rejects must
// be rejected, and whatever both accept must expand identically.
func TestExpandMatchesScontrol(t *testing.T) {
	sc := newScontrol(t)
	r := rand.New(rand.NewPCG(2026, 1))
	const nValid, nMutated = 800, 800
	var exprs []string
	for range nValid {
		exprs = append(exprs, genExpr(r))
	}
	for range nMutated {
		exprs = append(exprs, mutateExpr(r, genExpr(r)))
	}
	exprs = append(exprs, handPicked...)
	results := sc.runAll("hostnames", exprs)

	var matched, bothRejected, onlyWeReject, failures int
	var stricter []string
	for i, expr := range exprs {
		res := results[i]
		got, err := ExpandHostlist(expr)
		if i < nValid && err != nil {
			failures++
			t.Errorf("generated expression %q: %v (scontrol: %q, stderr %q)", expr, err, res.lines(), res.stderr)
			continue
		}
		switch {
		case res.rejected() && err != nil:
			bothRejected++
		case res.rejected():
			failures++
			t.Errorf("scontrol rejects %q (%v, stderr %q) but ExpandHostlist accepts it: %q",
				expr, res.err, strings.TrimSpace(res.stderr), got)
		case err != nil:
			onlyWeReject++
			if len(stricter) < 10 {
				stricter = append(stricter, fmt.Sprintf("%s -> scontrol prints %d names %s; ours: %s",
					clip(fmt.Sprintf("%q", expr)), len(res.lines()), clip(fmt.Sprintf("%q", res.lines())), err.(*HostlistError).Msg))
			}
		default:
			if diff := cmp.Diff(res.lines(), got, cmpNilEmpty); diff != "" {
				failures++
				t.Errorf("ExpandHostlist(%q) differs from scontrol (-scontrol +ours):\n%s", expr, diff)
				continue
			}
			matched++
		}
		if failures > 25 {
			t.Fatal("too many mismatches, stopping")
		}
	}
	t.Logf("compared %d expressions with scontrol (%d generated valid, %d mutated, %d hand-picked): "+
		"%d expanded identically, %d rejected by both, %d rejected only by ExpandHostlist",
		len(exprs), nValid, nMutated, len(handPicked), matched, bothRejected, onlyWeReject)
	for _, s := range stricter {
		t.Logf("stricter than Slurm: %s", s)
	}
}

// clip shortens s for a log line.
func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

// handPicked are inputs where Slurm behaves oddly.
var handPicked = []string{
	"", " ", ",,", "\t", "n[1-2]\tm", "a[1-2]b[3-4]c[5-6]", "a[1-2]b[3-4]c[5-6]d[7-8]",
	"n[3-1]", "n[a-b]", "n[1-2", "n1-2]", "n[]", "n[[1-2]]", "a[[1]b[2]", "n[1, 2]",
	"n[1-2]x", "n[1-2].ib", "n[1-3]x[1-2]y", "n[1-]", "n[+1]", "n[-1]", "n[1,,2]",
	"n[1,]", "n[,1]", "n[0-65535]", "n[0-65536]", "a[0-65535,0]b[1]",
	"a[0-50000,0-15534]b[1]", "a[3-1]b[1-2]c[1-2]", "x,a[3-1]b[1-2]c[1-2]",
	"n1\nn2", "n[1-2]\nm", "n[1-2]\rm", "[", "]", "[1-3]", "a]b[1,2]", "a[1]]b[2]",
	"n[18446744073709551615]", "n[18446744073709551616]", "-n[1-2]", "n[08-10]", "n[8-010]",
	"n[1-01]", "n[01-1]", "n[1x2]", "n[1-2-3]",
}

const litChars = "abcdefghijklmnopqrstuvwxyzABCXYZ0123456789-._"

func genLit(r *rand.Rand, minLen, maxLen int) string {
	n := minLen + r.IntN(maxLen-minLen+1)
	b := make([]byte, n)
	for i := range b {
		b[i] = litChars[r.IntN(len(litChars))]
	}
	return string(b)
}

// genNumber returns a bracket bound's text: v, sometimes zero-padded.
func genNumber(r *rand.Rand, v uint64) string {
	s := fmt.Sprint(v)
	if r.IntN(3) == 0 {
		s = strings.Repeat("0", 1+r.IntN(3)) + s
	}
	return s
}

func genGroup(r *rand.Rand, maxHosts int) (string, int) {
	var items []string
	count := 0
	for range 1 + r.IntN(3) {
		var lo uint64
		switch r.IntN(6) {
		case 0:
			lo = uint64(r.IntN(3))
		case 1:
			lo = 1e6 + uint64(r.IntN(1e6)) // long numbers
		case 2:
			lo = 95 + uint64(r.IntN(10)) // crossing 100
		default:
			lo = uint64(r.IntN(200))
		}
		span := r.IntN(max(1, min(6, maxHosts-count)))
		if count+span+1 > maxHosts && count > 0 {
			break
		}
		if span == 0 && r.IntN(2) == 0 {
			items = append(items, genNumber(r, lo))
		} else {
			items = append(items, genNumber(r, lo)+"-"+genNumber(r, lo+uint64(span)))
		}
		count += span + 1
	}
	return "[" + strings.Join(items, ",") + "]", count
}

// genExpr returns a random valid hostlist expression of moderate size.
func genExpr(r *rand.Rand) string {
	var b strings.Builder
	seps := []string{",", ",", ",", " ", "\t", ", ", ",,"}
	if r.IntN(8) == 0 {
		b.WriteString(seps[r.IntN(len(seps))])
	}
	for i := range 1 + r.IntN(4) {
		if i > 0 {
			b.WriteString(seps[r.IntN(len(seps))])
		}
		if r.IntN(4) == 0 {
			b.WriteString(genLit(r, 1, 8))
			continue
		}
		k := []int{1, 1, 1, 1, 2, 2, 2, 3, 3, 4}[r.IntN(10)]
		budget := 120
		for g := range k {
			if g == 0 {
				b.WriteString(genLit(r, 0, 6))
			} else if r.IntN(5) != 0 {
				b.WriteString(genLit(r, 1, 3))
			}
			grp, n := genGroup(r, budget)
			b.WriteString(grp)
			budget = max(1, budget/max(1, n))
		}
	}
	if r.IntN(8) == 0 {
		b.WriteString(seps[r.IntN(len(seps))])
	}
	return b.String()
}

// mutateExpr breaks (or not) a valid expression with a few random edits.
// Edits that could make Slurm print huge lists (one extra digit in a bound
// can multiply the output by ten per bracket group) are retried, since
// scontrol takes seconds per million names.
func mutateExpr(r *rand.Rand, expr string) string {
	limit := max(5000, roughSize(expr))
	for range 100 {
		if m := mutateOnce(r, expr); roughSize(m) <= limit {
			return m
		}
	}
	return expr
}

// roughSize overestimates how many names Slurm could print for expr,
// whatever its syntax errors.
func roughSize(expr string) uint64 {
	// Split into names at separators outside brackets; an unclosed '['
	// only makes a name longer and the estimate larger.
	var names []string
	depth, start := 0, 0
	for i := 0; i < len(expr); i++ {
		switch c := expr[i]; {
		case c == '[':
			depth++
		case c == ']':
			depth = max(depth-1, 0)
		case depth == 0 && isSep(c):
			names = append(names, expr[start:i])
			start = i + 1
		}
	}
	names = append(names, expr[start:])
	var total uint64
	for _, n := range names {
		s := roughNameSize(n)
		if s > math.MaxUint64/2-total {
			return math.MaxUint64 / 2
		}
		total += s
	}
	return total
}

func roughNameSize(expr string) uint64 {
	size := uint64(1)
	for _, part := range strings.Split(expr, "[")[1:] {
		inside, _, _ := strings.Cut(part, "]")
		var n uint64
		for item := range strings.SplitSeq(inside, ",") {
			lo, hi, _ := strings.Cut(item, "-")
			a, errA := strconv.ParseUint(strings.TrimLeft(lo, " +\t"), 10, 64)
			b, errB := strconv.ParseUint(strings.TrimLeft(hi, " +\t"), 10, 64)
			switch {
			case errA != nil || errB != nil || b < a:
				n++
			case b-a >= 1<<20:
				return math.MaxUint64 / 2
			default:
				n += b - a + 1
			}
		}
		if n > 0 && size > math.MaxUint64/n/4 {
			return math.MaxUint64 / 2
		}
		size *= max(n, 1)
	}
	return size
}

func mutateOnce(r *rand.Rand, expr string) string {
	const alphabet = "[]-,x 0159\t+:\n\rab"
	b := []byte(expr)
	for range 1 + r.IntN(3) {
		pos := r.IntN(len(b) + 1)
		switch r.IntN(4) {
		case 0, 1: // insert
			b = slices.Insert(b, pos, alphabet[r.IntN(len(alphabet))])
		case 2: // delete
			if pos < len(b) {
				b = slices.Delete(b, pos, pos+1)
			}
		case 3: // replace
			if pos < len(b) {
				b[pos] = alphabet[r.IntN(len(alphabet))]
			}
		}
	}
	return string(b)
}

// TestCompressMatchesScontrol compares CompressHostlist with
// `scontrol show hostlist` on sorted and unsorted host lists. Both must
// expand back to the input, and the strings are expected to be identical.
func TestCompressMatchesScontrol(t *testing.T) {
	sc := newScontrol(t)
	r := rand.New(rand.NewPCG(2026, 2))
	const nSorted, nUnsorted = 400, 200
	var lists [][]string
	var args []string
	for i := range nSorted + nUnsorted {
		hosts := randomHosts(r)
		if i < nSorted {
			slices.Sort(hosts)
		}
		lists = append(lists, hosts)
		args = append(args, strings.Join(hosts, ","))
	}
	results := sc.runAll("hostlist", args)
	failures := 0
	for i, hosts := range lists {
		res := results[i]
		if res.rejected() {
			t.Errorf("scontrol show hostlist %q failed: %v %q", args[i], res.err, res.stderr)
			failures++
			continue
		}
		want := strings.TrimSuffix(res.stdout, "\n")
		got := CompressHostlist(hosts)
		if got != want {
			t.Errorf("CompressHostlist(%q) = %q, scontrol show hostlist = %q", args[i], got, want)
			failures++
		}
		for _, expr := range []string{got, want} {
			back, err := ExpandHostlist(expr)
			if err != nil {
				t.Errorf("ExpandHostlist(%q): %v", expr, err)
				failures++
				continue
			}
			if diff := cmp.Diff(hosts, back, cmpNilEmpty); diff != "" {
				t.Errorf("ExpandHostlist(%q) does not give the input back (-want +got):\n%s", expr, diff)
				failures++
			}
		}
		if failures > 25 {
			t.Fatal("too many mismatches, stopping")
		}
	}
	t.Logf("compared %d host lists with scontrol show hostlist (%d sorted, %d unsorted)",
		len(lists), nSorted, nUnsorted)
}
