package integration

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
)

// A guide's block is one fenced block of docs/guides/*.md whose info string
// is "sh tested": its commands run here, for real, in bash. "# expect: RE"
// lines in it are regular expressions the block's output must match.
type guideBlock struct {
	line   int // of the opening fence
	script string
	expect []*regexp.Regexp
}

func guideBlocks(t *testing.T, path string) []guideBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []guideBlock
	var cur *guideBlock
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```sh tested":
			cur = &guideBlock{line: n}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			if re, ok := strings.CutPrefix(strings.TrimSpace(line), "# expect: "); ok {
				cur.expect = append(cur.expect, regexp.MustCompile("(?m)"+re))
			}
			cur.script += line + "\n"
		}
	}
	if cur != nil {
		t.Fatalf("%s:%d: a tested block that never ends", path, cur.line)
	}
	return blocks
}

// TestGuides runs every guide as a reader who pastes its tested blocks,
// in order, into one terminal: one bash session per guide (a cd, an export
// or an activated venv carries over to the next block), started in a fresh
// directory that holds a copy of this repository named batchkit, as `git
// clone` names it, with the environment of the user's login shell and
// nothing of the test's (readerEnv). So a guide runs only with what it
// tells the reader to do: build batchkit and put it on PATH, cd into the
// clone, name its files by paths the reader has.
func TestGuides(t *testing.T) {
	cpu.enter(t)
	guides, err := filepath.Glob("../docs/guides/*.md")
	if err != nil || len(guides) == 0 {
		t.Fatalf("no guides in docs/guides: %v", err)
	}
	files := repoFiles(t, "..")
	for _, g := range guides {
		if filepath.Base(g) == "README.md" {
			continue // the index
		}
		t.Run(filepath.Base(g), func(t *testing.T) {
			mostlyWaits(t) // the guides side by side
			blocks := guideBlocks(t, g)
			if len(blocks) == 0 {
				t.Fatalf("%s has no ```sh tested block: every guide's commands are tested", g)
			}
			dir := t.TempDir()
			copyRepo(t, "..", files, filepath.Join(dir, "batchkit"))
			runGuide(t, g, blocks, dir, readerEnv(os.Environ()))
		})
	}
}

// readerEnv is what a reader's shell has of environ: the login variables
// (who, where, language, terminal) and PATH without any directory that
// holds a batchkit, so that a guide that never builds it fails here
// rather than finding one installed on this machine. Nothing else: no
// BATCHKIT_* variable, nothing that `make test` or `go test` set, but
// SLURM_CONF: the tests' (useFastWait), the cluster's own with MinJobAge=2,
// which changes no output, only how soon sbatch --wait sees a job end (the
// migrating guide's four jobs waited up to 32 s each without it).
func readerEnv(environ []string) []string {
	var env []string
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == "PATH":
			env = append(env, "PATH="+withoutBatchkit(v))
		case slices.Contains(loginVars, k) || strings.HasPrefix(k, "LC_") || k == "SLURM_CONF":
			env = append(env, kv)
		}
	}
	return env
}

// loginVars are the variables of a login shell a reader has.
var loginVars = []string{"HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR"}

func withoutBatchkit(path string) string {
	var keep []string
	for _, d := range filepath.SplitList(path) {
		if _, err := os.Stat(filepath.Join(d, "batchkit")); err != nil && d != "" {
			keep = append(keep, d)
		}
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}

func TestReaderEnv(t *testing.T) {
	withBK := t.TempDir()
	os.WriteFile(filepath.Join(withBK, "batchkit"), nil, 0o755)
	got := readerEnv([]string{"HOME=/home/u", "PATH=" + withBK + ":/usr/bin", "BATCHKIT_PROFILE=mpich",
		"BATCHKIT_REQUIRE_CLUSTER=1", "GUIDE_DIR=/src/docs/guides", "LC_ALL=C", "GOFLAGS=-count=1", "USER=u",
		"SLURM_CONF=/tmp/batchkit-it-1/slurm.conf"})
	want := []string{"HOME=/home/u", "PATH=/usr/bin", "LC_ALL=C", "USER=u", "SLURM_CONF=/tmp/batchkit-it-1/slurm.conf"}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("readerEnv (-want +got):\n%s", diff)
	}
}

// repoFiles lists the repository's files as a clone of the work tree
// would have them: git's tracked files and the new ones it does not
// ignore, with their contents as they are in the work tree (so that an
// edited guide is tested with the files it is edited alongside).
func repoFiles(t *testing.T, root string) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("listing the repository's files (git ls-files): %v: the guides run in a copy of the clone", err)
	}
	var files []string
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return files
}

// copyRepo copies files (relative to root) to dst, with their modes.
// A tracked file deleted in the work tree is left out, as git would.
func copyRepo(t *testing.T, root string, files []string, dst string) {
	t.Helper()
	for _, f := range files {
		src := filepath.Join(root, f)
		fi, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dst, f)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			link, err := os.Readlink(src)
			if err == nil {
				err = os.Symlink(link, to)
			}
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(src)
		if err == nil {
			err = os.WriteFile(to, b, fi.Mode().Perm())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// blockEnd is the line runGuide prints after each block, to split the
// session's output into the blocks' own.
const blockEnd = "@@ batchkit guide: end of block @@"

// runGuide runs blocks in one bash session (-e, pipefail) in dir with
// env, and matches each block's output against its expectations. A block
// gets 5 minutes, the session their sum: the guides run side by side, each
// building batchkit in its own copy, beside other tests.
func runGuide(t *testing.T, guide string, blocks []guideBlock, dir string, env []string) {
	t.Helper()
	var script strings.Builder
	for _, b := range blocks {
		fmt.Fprintf(&script, "%sprintf '\\n%%s\\n' '%s'\n", b.script, blockEnd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(len(blocks))*5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script.String())
	cmd.Dir, cmd.Env = dir, env
	cmd.WaitDelay = 10 * time.Second // a job step left behind must not hold the output
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	outs := strings.Split(out.String(), "\n"+blockEnd+"\n")
	for i, b := range blocks {
		where := guide + ":" + strconv.Itoa(b.line)
		if i >= len(outs)-1 { // the session ended in this block
			t.Fatalf("%s: %v (the blocks before it ran)\n--- block\n%s--- output\n%s", where, cmp.Or(err, ctx.Err()), b.script, outs[len(outs)-1])
		}
		for _, re := range b.expect {
			if !re.MatchString(outs[i]) {
				t.Errorf("%s: output does not match %q\n--- output\n%s", where, re, outs[i])
			}
		}
	}
	if err != nil {
		t.Fatalf("%s: after the last block: %v\n%s", guide, err, outs[len(outs)-1])
	}
}

// The Intel guide's pip install line installs exactly the pins of
// scripts/intel-wheels.txt, the one place their versions are decided.
func TestGuideIntelPins(t *testing.T) {
	b, err := os.ReadFile("../scripts/intel-wheels.txt")
	if err != nil {
		t.Fatal(err)
	}
	var pins []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			pins = append(pins, line)
		}
	}
	g, err := os.ReadFile("../docs/guides/intel-oneccl.md")
	if err != nil {
		t.Fatal(err)
	}
	want := "pip install " + strings.Join(pins, " ") + "\n"
	if !strings.Contains(string(g), want) {
		t.Errorf("docs/guides/intel-oneccl.md has no line %q: scripts/intel-wheels.txt's pins changed?", strings.TrimSpace(want))
	}
}
