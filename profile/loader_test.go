package profile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/mpirun"
	siteconfigs "github.com/batchkit/batchkit/site-configs"
)

const siteTOML = `description = "the site"

[slurm]
partition = "cpu"
account = "ml"
time = "04:00:00"
extra_sbatch = ["--exclusive"]

[mpi]
flavor = "intelmpi"
binary = "/opt/intel/mpi/bin/mpirun"
args = ["-ppn", "2"]
bootstrap = "slurm"

[env.vars]
I_MPI_PIN_DOMAIN = "auto"
FI_PROVIDER = "psm3"
`

const userTOML = `extends = "site"

[slurm]
partition = "gpu"
extra_sbatch = ["--gres=gpu:1"]

[env.vars]
FI_PROVIDER = "tcp"
CCL_LOG_LEVEL = "info"
`

// A user profile extending a site profile, with flags on top: each value
// comes from the highest layer that sets it, and says where.
func TestLayeringAndProvenance(t *testing.T) {
	root := t.TempDir()
	site := write(t, root, "etc/site.toml", siteTOML)
	user := write(t, root, "home/user.toml", userTOML)
	loader := &Loader{Dirs: []string{filepath.Join(root, "home"), filepath.Join(root, "etc")}}

	r, err := loader.Resolve("user")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Set("slurm.time", "30", CommandLine); err != nil {
		t.Fatal(err)
	}
	if err := r.Set("env.vars.CCL_WORKER_COUNT", "2", CommandLine); err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}

	if got := []string{r.Chain[0].Path, r.Chain[1].Path}; !cmp.Equal(got, []string{user, site}) {
		t.Errorf("chain %v, want user then site", got)
	}
	want := []Setting{
		{"description", `"the site"`, Origin{Source: site, Line: 1, Col: 1, Layer: 1}},
		{"slurm.partition", `"gpu"`, Origin{Source: user, Line: 4, Col: 1, Layer: 2}},
		{"slurm.account", `"ml"`, Origin{Source: site, Line: 5, Col: 1, Layer: 1}},
		{"slurm.time", `"30"`, Origin{Source: CommandLine, Layer: 3}},
		{"slurm.extra_sbatch", `["--gres=gpu:1"]`, Origin{Source: user, Line: 5, Col: 1, Layer: 2}}, // lists replace
		{"mpi.flavor", `"intelmpi"`, Origin{Source: site, Line: 10, Col: 1, Layer: 1}},
		{"mpi.launcher", `"mpirun"`, Origin{Source: BuiltIn}},
		{"mpi.binary", `"/opt/intel/mpi/bin/mpirun"`, Origin{Source: site, Line: 11, Col: 1, Layer: 1}},
		{"mpi.args", `["-ppn", "2"]`, Origin{Source: site, Line: 12, Col: 1, Layer: 1}},
		{"mpi.bootstrap", `"slurm"`, Origin{Source: site, Line: 13, Col: 1, Layer: 1}},
		// Variables merge one by one.
		{"env.vars.CCL_LOG_LEVEL", `"info"`, Origin{Source: user, Line: 9, Col: 1, Layer: 2}},
		{"env.vars.CCL_WORKER_COUNT", `"2"`, Origin{Source: CommandLine, Layer: 3}},
		{"env.vars.FI_PROVIDER", `"tcp"`, Origin{Source: user, Line: 8, Col: 1, Layer: 2}},
		{"env.vars.I_MPI_PIN_DOMAIN", `"auto"`, Origin{Source: site, Line: 16, Col: 1, Layer: 1}},
		{"rendezvous.port_policy", `"job-id"`, Origin{Source: BuiltIn}},
		{"rendezvous.port", "29500", Origin{Source: BuiltIn}},
	}
	if diff := cmp.Diff(want, r.Settings()); diff != "" {
		t.Errorf("Settings (-want +got):\n%s", diff)
	}
	if o, _ := r.Origin("slurm.partition"); o.String() != user+":4:1" {
		t.Errorf("Origin.String() = %q", o.String())
	}
	// The layers themselves are untouched by the merge and by Set.
	if got := r.Chain[1].Profile.Env.Vars["FI_PROVIDER"]; got != "psm3" {
		t.Errorf("site's FI_PROVIDER became %q", got)
	}
	if _, ok := r.Chain[0].Profile.Env.Vars["CCL_WORKER_COUNT"]; ok {
		t.Error("Set wrote into the user's layer")
	}
}

// A flag that changes the launcher or the flavor drops what belonged to
// the old one, unless set on the command line too, in any order.
func TestSetDropsBoundKeys(t *testing.T) {
	resolve := func() *Resolved {
		dir := t.TempDir()
		write(t, dir, "site.toml", siteTOML)
		r, err := (&Loader{Dirs: []string{dir}}).Resolve("site")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	r := resolve()
	if err := r.Set("mpi.launcher", "srun", CommandLine); err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(); err != nil {
		t.Fatalf("srun with intelmpi and the default plugin: %v", err)
	}
	m := r.Profile.MPI
	if m.Binary != "" || m.Args != nil || m.Bootstrap != "" {
		t.Errorf("after --launcher srun: binary %q args %q bootstrap %q, want all dropped", m.Binary, m.Args, m.Bootstrap)
	}
	if _, ok := r.Origin("mpi.binary"); ok {
		t.Error("mpi.binary still has an origin")
	}

	// The same value again changes nothing.
	r = resolve()
	if err := r.Set("mpi.flavor", "intelmpi", CommandLine); err != nil {
		t.Fatal(err)
	}
	if r.Profile.MPI.Binary == "" {
		t.Error("setting the same flavor dropped the binary")
	}

	// A binary set on the command line stays, before or after the flavor.
	for _, order := range [][2][2]string{
		{{"mpi.binary", "mpirun.mpich"}, {"mpi.flavor", "mpich"}},
		{{"mpi.flavor", "mpich"}, {"mpi.binary", "mpirun.mpich"}},
	} {
		r = resolve()
		for _, kv := range order {
			if err := r.Set(kv[0], kv[1], CommandLine); err != nil {
				t.Fatal(err)
			}
		}
		if r.Profile.MPI.Binary != "mpirun.mpich" || r.Profile.MPI.Args != nil {
			t.Errorf("%v: binary %q args %q, want mpirun.mpich and no args", order, r.Profile.MPI.Binary, r.Profile.MPI.Args)
		}
	}
}

func TestSet(t *testing.T) {
	tests := []struct {
		key     string
		value   any
		want    func(*Profile) any
		wantVal any
		err     string
	}{
		{key: "slurm.partition", value: "gpu", want: func(p *Profile) any { return p.Slurm.Partition }, wantVal: "gpu"},
		{key: "mpi.flavor", value: "mpich", want: func(p *Profile) any { return p.MPI.Flavor }, wantVal: mpirun.MPICH},
		{key: "mpi.flavor", value: mpirun.IntelMPI, want: func(p *Profile) any { return p.MPI.Flavor }, wantVal: mpirun.IntelMPI},
		{key: "mpi.oversubscribe", value: "true", want: func(p *Profile) any { return p.MPI.Oversubscribe }, wantVal: true},
		{key: "mpi.oversubscribe", value: false, want: func(p *Profile) any { return p.MPI.Oversubscribe }, wantVal: false},
		{key: "rendezvous.port", value: "29400", want: func(p *Profile) any { return p.Rendezvous.Port }, wantVal: 29400},
		{key: "rendezvous.port", value: 29401, want: func(p *Profile) any { return p.Rendezvous.Port }, wantVal: 29401},
		{key: "slurm.modules", value: "a/1, b/2", want: func(p *Profile) any { return p.Slurm.Modules }, wantVal: []string{"a/1", "b/2"}},
		{key: "slurm.modules", value: "", want: func(p *Profile) any { return p.Slurm.Modules }, wantVal: []string(nil)},
		{key: "mpi.args", value: []string{"-x", "a,b"}, want: func(p *Profile) any { return p.MPI.Args }, wantVal: []string{"-x", "a,b"}},
		{key: "env.source", value: "/a.sh --x,/b.sh", want: func(p *Profile) any { return p.Env.Source },
			wantVal: []Script{{Script: "/a.sh", Args: []string{"--x"}}, {Script: "/b.sh", Args: []string{}}}},
		{key: "env.vars.FOO", value: "bar", want: func(p *Profile) any { return p.Env.Vars["FOO"] }, wantVal: "bar"},
		{key: "env.vars.FOO", value: "a\nb", want: func(p *Profile) any { return p.Env.Vars["FOO"] }, wantVal: "a\nb"},
		{key: "templates", value: os.TempDir(), want: func(p *Profile) any { return p.Templates }, wantVal: os.TempDir()},

		{key: "mpi.flavor", value: "openmp", err: `command line: mpi.flavor: unknown MPI flavor "openmp"`},
		{key: "mpi.launcher", value: "torchrun", err: `command line: mpi.launcher: unknown launcher "torchrun"`},
		{key: "slurm.time", value: "1h", err: `command line: slurm.time: invalid time "1h"`},
		{key: "rendezvous.port", value: "http", err: `command line: rendezvous.port: want an integer, got "http"`},
		{key: "rendezvous.port", value: "80", err: "port 80 out of range"},
		{key: "mpi.oversubscribe", value: "sure", err: `want true or false, got "sure"`},
		{key: "slurm.partiton", value: "x", err: `command line: slurm.partiton: unknown key: did you mean "slurm.partition"?`},
		{key: "env.vars.1X", value: "x", err: `env.vars.1X: "1X" is not a valid environment variable name`},
		{key: "env.vars.RANK", value: "0", err: "batchkit sets RANK"},
		{key: "env.vars", value: "x", err: "command line: env.vars: a table of variables: set one as env.vars.NAME=VALUE"},
		{key: "env.vars.", value: "x", err: "set one as env.vars.NAME=VALUE"},
		{key: "env.vars.FOO", value: "a\xffb", err: `command line: env.vars.FOO: "a\xffb" is not valid UTF-8 text`},
		{key: "slurm.modules", value: []string{"ok", "\xfe"}, err: `"\xfe" is not valid UTF-8 text`},
		{key: "extends", value: "x", err: "extends can only be set in a profile"},
		{key: "env.source", value: "rel.sh", err: `env.source[0].script: "rel.sh": want an absolute path`},
		{key: "mpi.bootstrap", value: "carrier-pigeon", err: "unknown bootstrap"},
		{key: "slurm.modules", value: 3, err: "want an array of strings, got int"},
		{key: "slurm.extra_sbatch", value: "-x", err: `command line: slurm.extra_sbatch[0]: sbatch directive "-x": want the long form --flag=value`},
		{key: "env.vars.FOO", value: "a\x00b", err: `command line: env.vars.FOO: "a\u0000b" contains a NUL byte`},
	}
	for _, tt := range tests {
		r := Merge()
		err := r.Set(tt.key, tt.value, CommandLine)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Set(%s, %v) = %v, want error containing %q", tt.key, tt.value, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Set(%s, %v): %v", tt.key, tt.value, err)
			continue
		}
		if diff := cmp.Diff(tt.wantVal, tt.want(&r.Profile)); diff != "" {
			t.Errorf("Set(%s, %v) (-want +got):\n%s", tt.key, tt.value, diff)
		}
		if o, ok := r.Origin(tt.key); !ok || o.Source != CommandLine {
			t.Errorf("Set(%s): origin %v, want %s", tt.key, o, CommandLine)
		}
	}
}

func TestValidateMerged(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "mp.toml", "[mpi]\nflavor = \"mpich\"\nlauncher = \"srun\"\nsrun_mpi = \"pmi2\"\n")
	loader := &Loader{Dirs: []string{dir}}

	// Switching the flavor drops the plugin written for MPICH: Open MPI gets
	// its own default (pmix), which is fine.
	r, err := loader.Resolve("mp")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Set("mpi.flavor", "openmpi", CommandLine); err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(); err != nil {
		t.Errorf("openmpi with the default plugin: %v", err)
	}
	// Asking for pmi2 with Open MPI is an error naming both origins.
	if err := r.Set("mpi.srun_mpi", "pmi2", CommandLine); err != nil {
		t.Fatal(err)
	}
	err = r.Validate()
	if want := "command line: mpi.srun_mpi: Open MPI under srun needs --mpi=pmix (Open MPI 5 has no PMI-2 support), not pmi2 (flavor openmpi from command line)"; err == nil || err.Error() != want {
		t.Errorf("Validate = %v, want %s", err, want)
	}

	// A bootstrap for Hydra set on the command line with Open MPI's flavor.
	r, _ = loader.Resolve("mp")
	for _, kv := range [][2]string{{"mpi.launcher", "mpirun"}, {"mpi.flavor", "openmpi"}, {"mpi.bootstrap", "ssh"}} {
		if err := r.Set(kv[0], kv[1], CommandLine); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), `mpi.bootstrap: "ssh" is not an Open MPI plm component`) {
		t.Errorf("Validate = %v", err)
	}
}

// The search path of NewLoader: BATCHKIT_PROFILE_PATH, the user's config
// directory, /etc, embedded.
func TestNewLoader(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	env := map[string]string{"BATCHKIT_PROFILE_PATH": "/a:/b::/c"}
	l := NewLoader(func(k string) string { return env[k] })
	want := []string{"/a", "/b", "/c", filepath.Join(cfg, "batchkit", "profiles"), "/etc/batchkit/profiles"}
	if diff := cmp.Diff(want, l.Dirs); diff != "" {
		t.Errorf("Dirs (-want +got):\n%s", diff)
	}
	if l.Embedded == nil {
		t.Error("no embedded profiles")
	}

	if got := DefaultName(func(string) string { return "" }); got != "local" {
		t.Errorf("DefaultName = %q, want local", got)
	}
	if got := DefaultName(func(k string) string { return map[string]string{"BATCHKIT_PROFILE": "mpich"}[k] }); got != "mpich" {
		t.Errorf("DefaultName with BATCHKIT_PROFILE = %q, want mpich", got)
	}
}

func TestIsPath(t *testing.T) {
	for in, want := range map[string]bool{
		"local": false, "intel-oneccl": false, "site.v2": false,
		"site.toml": true, "./site": true, "/etc/x": true, "dir/site": true,
	} {
		if got := IsPath(in); got != want {
			t.Errorf("IsPath(%q) = %v, want %v", in, got, want)
		}
	}
}

// Lookup order and shadowing, with temporary directories.
func TestLookupOrder(t *testing.T) {
	root := t.TempDir()
	env1, env2, user, sys := filepath.Join(root, "env1"), filepath.Join(root, "env2"), filepath.Join(root, "user"), filepath.Join(root, "etc")
	prof := func(desc string) string { return "description = \"" + desc + "\"\n[mpi]\nflavor = \"mpich\"\n" }
	write(t, env2, "a.toml", prof("a in env2"))
	write(t, user, "a.toml", prof("a in user"))
	write(t, sys, "a.toml", prof("a in etc"))
	write(t, user, "b.toml", prof("b in user"))
	write(t, sys, "b.toml", prof("b in etc"))
	write(t, sys, "c.toml", prof("c in etc"))
	write(t, sys, "README.md", "not a profile")
	write(t, sys, "broken.toml", "[mpi\n")
	if err := os.Mkdir(filepath.Join(sys, "dir.toml"), 0o755); err != nil {
		t.Fatal(err)
	}
	embedded := fstest.MapFS{
		"c.toml": {Data: []byte(prof("c embedded"))},
		"d.toml": {Data: []byte(prof("d embedded"))},
	}
	l := &Loader{Dirs: []string{env1, env2, user, sys, filepath.Join(root, "missing")}, Embedded: embedded}

	for name, want := range map[string]string{
		"a": filepath.Join(env2, "a.toml"),
		"b": filepath.Join(user, "b.toml"),
		"c": filepath.Join(sys, "c.toml"),
		"d": "embedded:d.toml",
	} {
		e, err := l.Find(name)
		if err != nil || e.Path != want {
			t.Errorf("Find(%s) = %s, %v; want %s", name, e.Path, err, want)
		}
	}
	// A path is a path, even if a profile of that name exists.
	p := write(t, root, "a.toml", prof("a by path"))
	if e, err := l.Find(p); err != nil || e.Path != p || e.Name != "a" {
		t.Errorf("Find(path) = %+v, %v", e, err)
	}
	if _, err := l.Find(filepath.Join(root, "nope.toml")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("Find(missing path) = %v", err)
	}
	_, err := l.Find("e")
	if err == nil || !strings.Contains(err.Error(), `profile "e" not found in `+env1) || !strings.Contains(err.Error(), "the embedded profiles") {
		t.Errorf("Find(e) = %v", err)
	}

	entries, err := l.List()
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Name, Path string
		Shadowed   bool
		Desc       string
		Bad        bool
	}
	var got []row
	for _, e := range entries {
		got = append(got, row{e.Name, e.Path, e.Shadowed, e.Description, e.Err != nil})
	}
	want := []row{
		{"a", filepath.Join(env2, "a.toml"), false, "a in env2", false},
		{"a", filepath.Join(user, "a.toml"), true, "a in user", false},
		{"a", filepath.Join(sys, "a.toml"), true, "a in etc", false},
		{"b", filepath.Join(user, "b.toml"), false, "b in user", false},
		{"b", filepath.Join(sys, "b.toml"), true, "b in etc", false},
		{"broken", filepath.Join(sys, "broken.toml"), false, "", true},
		{"c", filepath.Join(sys, "c.toml"), false, "c in etc", false},
		{"c", "embedded:c.toml", true, "c embedded", false},
		{"d", "embedded:d.toml", false, "d embedded", false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}

// BATCHKIT_PROFILE_PATH through NewLoader, end to end.
func TestProfilePathEnv(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "local.toml", "description = \"my local\"\nextends = \"local\"\n[slurm]\npartition = \"mine\"\n")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	l := NewLoader(func(k string) string { return map[string]string{"BATCHKIT_PROFILE_PATH": dir}[k] })
	r, err := l.Resolve("local")
	if err != nil {
		t.Fatal(err)
	}
	// The user's local extends the embedded local, of the same name.
	if r.Path != filepath.Join(dir, "local.toml") || len(r.Chain) != 2 || r.Chain[1].Path != "embedded:local.toml" {
		t.Errorf("chain %s, %d files", r.Path, len(r.Chain))
	}
	if r.Profile.Slurm.Partition != "mine" || r.Profile.MPI.Binary != "mpirun.openmpi" {
		t.Errorf("partition %q binary %q", r.Profile.Slurm.Partition, r.Profile.MPI.Binary)
	}
}

// A profile extending its own name gets the next of that name; with none
// left, that is an error rather than a cycle.
func TestExtendsSameName(t *testing.T) {
	root := t.TempDir()
	user, sys := filepath.Join(root, "user"), filepath.Join(root, "etc")
	write(t, user, "site.toml", "extends = \"site\"\n[slurm]\npartition = \"user\"\n")
	write(t, sys, "site.toml", "extends = \"site\"\n[slurm]\naccount = \"sys\"\n")
	embedded := fstest.MapFS{"site.toml": {Data: []byte("[mpi]\nflavor = \"mpich\"\n")}}

	r, err := (&Loader{Dirs: []string{user, sys}, Embedded: embedded}).Resolve("site")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range r.Chain {
		paths = append(paths, f.Path)
	}
	if diff := cmp.Diff([]string{filepath.Join(user, "site.toml"), filepath.Join(sys, "site.toml"), "embedded:site.toml"}, paths); diff != "" {
		t.Errorf("chain (-want +got):\n%s", diff)
	}
	if p := r.Profile; p.Slurm.Partition != "user" || p.Slurm.Account != "sys" || p.MPI.Flavor != mpirun.MPICH {
		t.Errorf("merged %+v", p.Slurm)
	}

	_, err = (&Loader{Dirs: []string{user, sys}}).Resolve("site")
	if err == nil || !strings.Contains(err.Error(), `site.toml:1:11: extends: profile "site" extends "site", and there is no other "site" after it`) {
		t.Errorf("without a last site: %v", err)
	}
}

// A relative extends path is relative to the extending file; a longer
// cycle is named in full.
func TestExtendsPathsAndCycles(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "sub/base.toml", "[mpi]\nflavor = \"mpich\"\n")
	write(t, dir, "top.toml", "extends = \"sub/base.toml\"\n")
	r, err := (&Loader{}).Resolve(filepath.Join(dir, "top.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Profile.MPI.Flavor != mpirun.MPICH {
		t.Errorf("flavor %q", r.Profile.MPI.Flavor)
	}

	write(t, dir, "x.toml", "extends = \"y\"\n")
	write(t, dir, "y.toml", "extends = \"z\"\n")
	write(t, dir, "z.toml", "# z\nextends = \"y\"\n")
	_, err = (&Loader{Dirs: []string{dir}}).Resolve("x")
	want := filepath.Join(dir, "z.toml") + ":2:11: extends cycle: y → z → y"
	if err == nil || err.Error() != want {
		t.Errorf("cycle: %v, want %s", err, want)
	}
}

// srun's --mpi plugin goes with launcher srun: a layer that switches to
// another launcher drops an inherited one, a switch to srun keeps it, and a
// plugin left under another launcher is an error at the plugin.
func TestSrunMPIFollowsLauncher(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "to-mpirun.toml", "extends = \"mpich\"\n[mpi]\nlauncher = \"mpirun\"\n")
	write(t, dir, "plugin.toml", "[mpi]\nflavor = \"mpich\"\nsrun_mpi = \"pmix\"\n")
	write(t, dir, "to-srun.toml", "extends = \"plugin\"\n[mpi]\nlauncher = \"srun\"\n")
	write(t, dir, "stray.toml", "extends = \"local\"\n[mpi]\nsrun_mpi = \"pmix\"\n")
	loader := &Loader{Dirs: []string{dir}, Embedded: siteconfigs.FS}

	tests := []struct {
		name    string
		profile string
		set     [][2]string // flags, in order
		want    string      // the merged srun_mpi
		err     string      // Validate's error, with the profiles' directory as DIR
	}{
		{name: "mpich as shipped", profile: "mpich", want: "pmi2"},
		{name: "--launcher mpirun", profile: "mpich", set: [][2]string{{"mpi.launcher", "mpirun"}}},
		{name: "--launcher mpiexec", profile: "mpich", set: [][2]string{{"mpi.launcher", "mpiexec"}}},
		{name: "--launcher srun again", profile: "mpich", set: [][2]string{{"mpi.launcher", "srun"}}, want: "pmi2"},
		{name: "extends, launcher mpirun", profile: "to-mpirun"},
		{name: "extends, launcher srun", profile: "to-srun", want: "pmix"},
		{name: "plugin on the command line too", profile: "mpich",
			set:  [][2]string{{"mpi.srun_mpi", "pmix"}, {"mpi.launcher", "mpirun"}},
			want: "pmix", err: "command line: mpi.srun_mpi: srun's --mpi plugin needs launcher srun (launcher mpirun from command line)"},
		{name: "plugin with the default launcher", profile: "plugin", want: "pmix",
			err: "DIR/plugin.toml:3:1: mpi.srun_mpi: srun's --mpi plugin needs launcher srun (launcher mpirun from built-in default)"},
		{name: "plugin under an inherited launcher", profile: "stray", want: "pmix",
			err: "DIR/stray.toml:3:1: mpi.srun_mpi: srun's --mpi plugin needs launcher srun (launcher mpirun from embedded:local.toml:15:1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chain, err := loadChain(loader, tt.profile)
			if err != nil {
				t.Fatal(err)
			}
			r := Merge(chain...)
			for _, kv := range tt.set {
				if err := r.Set(kv[0], kv[1], CommandLine); err != nil {
					t.Fatal(err)
				}
			}
			if got := r.Profile.MPI.SrunMPI; got != tt.want {
				t.Errorf("srun_mpi = %q, want %q", got, tt.want)
			}
			if _, ok := r.Origin("mpi.srun_mpi"); ok != (tt.want != "") {
				t.Errorf("srun_mpi has an origin: %v, want %v", ok, tt.want != "")
			}
			got := ""
			if err := r.Validate(); err != nil {
				got = strings.ReplaceAll(err.Error(), dir, "DIR")
			}
			if got != tt.err {
				t.Errorf("Validate = %q, want %q", got, tt.err)
			}
		})
	}
}

// loadChain reads a profile and the ones it extends without Resolve's
// validation, which is what the test checks.
func loadChain(l *Loader, name string) ([]*File, error) {
	e, err := l.Find(name)
	var chain []*File
	for err == nil {
		var f *File
		if f, err = l.Load(e); err != nil {
			break
		}
		chain = append(chain, f)
		if f.Profile.Extends == "" {
			return chain, nil
		}
		e, err = l.findBase(f.Profile.Extends, e)
	}
	return nil, err
}

// profile list marks a profile invalid when its chain does not resolve,
// not only when its own file does not parse: what profile check says.
func TestListResolvesChains(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "ok.toml", "extends = \"local\"\n")
	write(t, dir, "nobase.toml", "extends = \"nosuch\"\n")
	write(t, dir, "c1.toml", "extends = \"c2\"\n")
	write(t, dir, "c2.toml", "extends = \"c1\"\n")
	write(t, dir, "noflavor.toml", "description = \"nothing else\"\n")
	l := &Loader{Dirs: []string{dir}, Embedded: siteconfigs.FS}
	entries, err := l.List()
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]bool{}
	for _, e := range entries {
		bad[e.Name] = e.Err != nil
	}
	want := map[string]bool{"ok": false, "nobase": true, "c1": true, "c2": true, "noflavor": true,
		"local": false, "mpich": false, "intel-oneccl": false, "intel-pip": false, "generic-openmpi": false}
	if diff := cmp.Diff(want, bad); diff != "" {
		t.Errorf("invalid marks (-want +got):\n%s", diff)
	}
	// Not finding a base names the profiles there are, without recursing
	// into List (which resolves, and would look the missing base up again).
	if _, err := l.Resolve("nobase"); err == nil || !strings.Contains(err.Error(), `profile "nosuch" not found`) {
		t.Errorf("Resolve(nobase) = %v", err)
	}
}

// Names lists each profile of the search path once, a user's file of a
// built-in name too, sorted, broken ones included (it reads none of them):
// what TAB offers after --profile.
func TestNames(t *testing.T) {
	user, site := t.TempDir(), t.TempDir()
	write(t, user, "mine.toml", "[slurm\n")
	write(t, user, "local.toml", "extends = \"mpich\"\n")
	write(t, site, "mine.toml", "description = \"the site's\"\n")
	write(t, site, "notes.txt", "not a profile\n")
	os.Mkdir(filepath.Join(site, "dir.toml"), 0o755)
	l := &Loader{Dirs: []string{user, site, filepath.Join(site, "nosuch")}, Embedded: siteconfigs.FS}
	got, err := l.Names()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"generic-openmpi", "intel-oneccl", "intel-pip", "local", "mine", "mpich"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
}

// Profiles checked together that extend one broken base say its problem
// once: each Resolve lists it, Said passes it on the first time only
// (issue 24 item 13).
func TestSaidOnce(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "base.toml", "[mpi]\nflavor = 5\n")
	write(t, dir, "a.toml", "extends = \"base\"\n")
	write(t, dir, "b.toml", "extends = \"base\"\n[slurm]\npartiton = \"x\"\n")
	write(t, dir, "c.toml", "extends = \"a\"\n")
	l := &Loader{Dirs: []string{dir}}
	baseProblem := "DIR/base.toml:2:10: mpi.flavor: want a string, got integer 5 (quote it: \"5\")"
	tests := []struct {
		name     string
		profiles []string
		want     [][]string // the fresh problems of each profile, in turn
	}{
		{"two extending one base", []string{"a", "b"}, [][]string{
			{baseProblem},
			{`DIR/b.toml:3:1: unknown key "slurm.partiton": did you mean "slurm.partition"?`},
		}},
		{"a chain, base first", []string{"base", "a", "c"}, [][]string{{baseProblem}, nil, nil}},
		{"a chain, base last", []string{"c", "a", "base"}, [][]string{{baseProblem}, nil, nil}},
		{"one profile twice", []string{"a", "a"}, [][]string{{baseProblem}, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			said := Said{}
			var got [][]string
			for _, name := range tt.profiles {
				_, err := l.Resolve(name)
				if err == nil {
					t.Fatalf("Resolve(%s): no error", name)
				}
				var fresh []string
				for _, e := range said.Fresh(err) {
					fresh = append(fresh, strings.ReplaceAll(e.Error(), dir, "DIR"))
				}
				got = append(got, fresh)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("fresh problems (-want +got):\n%s", diff)
			}
		})
	}
}

// A --set value that opens a TOML value of its key's kind (a list literal, a
// quoted string) is read as TOML: commas inside it split nothing (issue 24
// item 13). Bad TOML, a wrong element type or text setting more than the
// key is a one-line error naming the key.
func TestSetTOMLValue(t *testing.T) {
	tests := []struct {
		name, key, value string
		want             any // the key's value after Set
		err              string
	}{
		{name: "list with a comma inside", key: "mpi.args", value: `["--mca","a,b"]`, want: []string{"--mca", "a,b"}},
		{name: "list across lines, with a comment", key: "mpi.args", value: "[\n  \"-x\", # export\n  \"A=1,2\",\n]", want: []string{"-x", "A=1,2"}},
		{name: "list after spaces", key: "slurm.modules", value: ` ['a/1', "b/2"]`, want: []string{"a/1", "b/2"}},
		{name: "empty list", key: "mpi.args", value: `[]`, want: []string{}},
		{name: "short form still splits", key: "slurm.modules", value: `a/1, b/2`, want: []string{"a/1", "b/2"}},
		{name: "short form of a list not opening with [", key: "mpi.args", value: `"-x",y`, want: []string{`"-x"`, "y"}},
		{name: "scripts as inline tables", key: "env.source", value: `[{ script = "/a.sh", args = ["--x,y"] }]`,
			want: []Script{{Script: "/a.sh", Args: []string{"--x,y"}}}},
		{name: "basic string", key: "slurm.partition", value: `"gpu"`, want: "gpu"},
		{name: "literal string", key: "mpi.flavor", value: `'mpich'`, want: mpirun.MPICH},
		{name: "string with a comma", key: "env.vars.FOO", value: `"a,b"`, want: "a,b"},
		{name: "escape", key: "env.vars.FOO", value: `"a\tb"`, want: "a\tb"},
		{name: "quote inside plain text", key: "env.vars.FOO", value: `a"b`, want: `a"b`},

		{name: "unterminated list", key: "mpi.args", value: `[`,
			err: "command line: mpi.args: not a TOML value: unexpected EOF; expected value"},
		{name: "unterminated string in a list", key: "mpi.args", value: `["a`,
			err: `command line: mpi.args: not a TOML value: unexpected EOF; expected '"'`},
		{name: "newline in a string", key: "mpi.args", value: "[\"a\n\"]",
			err: "command line: mpi.args: not a TOML value: strings cannot contain newlines"},
		{name: "integers for strings", key: "mpi.args", value: `[1,2]`,
			err: "command line: mpi.args[0]: want a string, got integer 1"},
		{name: "nested list", key: "mpi.args", value: `[["a"]]`,
			err: "command line: mpi.args[0]: want a string, got an array"},
		{name: "empty element", key: "mpi.args", value: `[""]`, err: "command line: mpi.args[0]: empty"},
		{name: "text after the list", key: "mpi.args", value: `["a"] x`,
			err: "command line: mpi.args: not a TOML value: expected a top-level item to end with a newline, comment, or EOF, but got 'x' instead"},
		{name: "a newline, then another key", key: "mpi.args", value: "[\"a\"]\nslurm.partition = \"x\"",
			err: "command line: mpi.args: one TOML value, please: the text after it sets slurm.partition"},
		{name: "a newline, then a table", key: "mpi.args", value: "[\"a\"]\n[slurm]",
			err: "command line: mpi.args: one TOML value, please: the text after it sets slurm"},
		{name: "a quote, a newline, more", key: "env.vars.FOO", value: "\"a\"\nb",
			err: `command line: env.vars.FOO: not a TOML value: unexpected EOF; expected key separator '='`},
		{name: "unterminated string", key: "slurm.partition", value: `"gpu`,
			err: `command line: slurm.partition: not a TOML value: unexpected EOF; expected '"'`},
		{name: "string checked as in a file", key: "slurm.partition", value: `"a b"`,
			err: `command line: slurm.partition: "a b" contains white space`},
		{name: "unknown flavor", key: "mpi.flavor", value: `"mpi"`,
			err: `command line: mpi.flavor: unknown MPI flavor "mpi"`},
		{name: "script as a string", key: "env.source", value: `["/a.sh"]`,
			err: `command line: env.source[0]: want a table, got string "/a.sh"`},
		{name: "variable name with a newline", key: "env.vars.a\nb", value: `"x"`,
			err: `command line: env.vars."a\nb": "a\nb" is not a valid environment variable name`},
		{name: "unknown key with a newline", key: "slurm.a\nb", value: `"x"`,
			err: `command line: "slurm.a\nb": unknown key`},
		{name: "relative script", key: "env.source", value: `[{ script = "rel.sh" }]`,
			err: `command line: env.source[0].script: "rel.sh": want an absolute path`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Merge()
			err := r.Set(tt.key, tt.value, CommandLine)
			if tt.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
					t.Fatalf("Set(%s, %q) = %v, want an error starting %q", tt.key, tt.value, err, tt.err)
				}
				if strings.ContainsAny(err.Error(), "\n\r") {
					t.Errorf("error spans lines: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Set(%s, %q): %v", tt.key, tt.value, err)
			}
			got, _ := get(&r.Profile, tt.key)
			if diff := cmp.Diff(tt.want, got.Interface()); diff != "" {
				t.Errorf("Set(%s, %q) (-want +got):\n%s", tt.key, tt.value, diff)
			}
		})
	}
}
