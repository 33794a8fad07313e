package integration

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
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

// TestGuides runs every tested block of every guide in order, the blocks of
// one guide in one working directory (later blocks use what earlier ones
// wrote), with batchkit on PATH and a home directory of its own.
func TestGuides(t *testing.T) {
	cpu.enter(t)
	guides, err := filepath.Glob("../docs/guides/*.md")
	if err != nil || len(guides) == 0 {
		t.Fatalf("no guides in docs/guides: %v", err)
	}
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
			dir, home := t.TempDir(), t.TempDir()
			env := append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "HOME="+home,
				"XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "BATCHKIT_PROFILE_PATH=", "GUIDE_DIR="+filepath.Dir(mustAbs(t, g)))
			for _, b := range blocks {
				runGuideBlock(t, g, b, dir, env)
			}
		})
	}
}

func runGuideBlock(t *testing.T, guide string, b guideBlock, dir string, env []string) {
	t.Helper()
	// Minutes: a block runs beside other tests, and a cold build cache
	// makes make build-ccl compile every package.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", b.script)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	where := guide + ":" + strconv.Itoa(b.line)
	if err != nil {
		t.Fatalf("%s: %v\n--- script\n%s--- output\n%s", where, err, b.script, out.String())
	}
	for _, re := range b.expect {
		if !re.Match(out.Bytes()) {
			t.Errorf("%s: output does not match %q\n--- output\n%s", where, re, out.String())
		}
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
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
