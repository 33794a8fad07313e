package tcp

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/topology"
)

func TestResolveToken(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"HOME": home}
	world := topology.Topology{WorldSize: 4, JobID: "4711"}

	t.Run("explicit token wins", func(t *testing.T) {
		got, err := ResolveToken(topology.MapEnv(map[string]string{envvars.Token: "abc", "HOME": home}), world)
		if err != nil || got != "abc" {
			t.Fatalf("got %q, %v", got, err)
		}
	})
	t.Run("world of one needs none", func(t *testing.T) {
		got, err := ResolveToken(topology.MapEnv(nil), topology.Topology{WorldSize: 1})
		if err != nil || got != "" {
			t.Fatalf("got %q, %v", got, err)
		}
	})
	t.Run("no job id", func(t *testing.T) {
		_, err := ResolveToken(topology.MapEnv(env), topology.Topology{WorldSize: 2})
		if err == nil || !strings.Contains(err.Error(), envvars.Token) {
			t.Fatalf("err = %v, want one naming %s", err, envvars.Token)
		}
	})
	t.Run("derived: same job same token, other job other token, secret private", func(t *testing.T) {
		// Ranks race to create the secret; all must end with one token.
		toks := make([]string, 8)
		var wg sync.WaitGroup
		for i := range toks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tok, err := ResolveToken(topology.MapEnv(env), world)
				if err != nil {
					t.Error(err)
				}
				toks[i] = tok
			}()
		}
		wg.Wait()
		for _, tok := range toks {
			if tok != toks[0] || len(tok) != 64 {
				t.Fatalf("tokens differ or malformed: %q", toks)
			}
		}
		other, err := ResolveToken(topology.MapEnv(env), topology.Topology{WorldSize: 4, JobID: "4712"})
		if err != nil || other == toks[0] {
			t.Fatalf("job 4712 token %q, %v: must differ from job 4711's", other, err)
		}
		path := filepath.Join(home, ".config", secretFile)
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("secret file %s: %v, mode %v", path, err, fi.Mode())
		}
		left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".job-secret-*"))
		if len(left) != 0 {
			t.Errorf("temporary files left behind: %q", left)
		}
		// Another user's secret must not be usable: a world-readable one is refused.
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = ResolveToken(topology.MapEnv(env), world)
		if err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Fatalf("world-readable secret: err = %v", err)
		}
	})
	t.Run("one token per srun step", func(t *testing.T) {
		xdg := t.TempDir()
		step := func(id string) string {
			e := map[string]string{"XDG_CONFIG_HOME": xdg}
			tok, err := ResolveToken(topology.MapEnv(e), topology.Topology{Launcher: topology.Slurm, WorldSize: 4, JobID: "4711", StepID: id})
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
		job, err := ResolveToken(topology.MapEnv(map[string]string{"XDG_CONFIG_HOME": xdg}), world)
		if err != nil {
			t.Fatal(err)
		}
		if step("0") != job {
			t.Error("the first step's token is not the job's")
		}
		if step("1") == step("0") || step("1") == step("2") {
			t.Error("two steps of one job share a token: running at once, each would accept the other's ranks")
		}
	})
	t.Run("XDG_CONFIG_HOME", func(t *testing.T) {
		xdg := t.TempDir()
		if _, err := ResolveToken(topology.MapEnv(map[string]string{"XDG_CONFIG_HOME": xdg}), world); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(xdg, secretFile)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("garbage secret", func(t *testing.T) {
		xdg := t.TempDir()
		p := filepath.Join(xdg, secretFile)
		os.MkdirAll(filepath.Dir(p), 0o700)
		os.WriteFile(p, []byte("not hex\n"), 0o600)
		_, err := ResolveToken(topology.MapEnv(map[string]string{"XDG_CONFIG_HOME": xdg}), world)
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Fatalf("err = %v, want one naming %s", err, p)
		}
	})
	t.Run("link to nothing", func(t *testing.T) {
		xdg := t.TempDir()
		p := filepath.Join(xdg, secretFile)
		os.MkdirAll(filepath.Dir(p), 0o700)
		gone := filepath.Join(xdg, "moved-away")
		if err := os.Symlink(gone, p); err != nil {
			t.Fatal(err)
		}
		_, err := ResolveToken(topology.MapEnv(map[string]string{"XDG_CONFIG_HOME": xdg}), world)
		want := "job secret " + p + " is a symbolic link to " + gone + ", which does not exist"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want %q", err, want)
		}
		if _, err := os.Lstat(gone); err == nil {
			t.Error("the link's target was created: the secret must not land where a link points")
		}
	})
}

func TestDeriveTokenStable(t *testing.T) {
	// Pinned (computed independently with Python's hmac module) so that ranks
	// running different batchkit builds still agree.
	const want = "d064ebf58182bc6e61e59c6d07a10f3906102b0db533b5c3376cb49222b6ed2a"
	if got := deriveToken([]byte("0123456789abcdef"), "12345"); got != want {
		t.Fatalf("deriveToken = %s, want %s", got, want)
	}
}
