package profile

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-multierror"

	"github.com/batchkit/batchkit/mpirun"
	siteconfigs "github.com/batchkit/batchkit/site-configs"
)

var update = flag.Bool("update", false, "rewrite testdata/broken/*.golden")

// embeddedOnly finds nothing on disk, so the tests do not depend on the
// machine's /etc or home.
func embeddedOnly() *Loader { return &Loader{Embedded: siteconfigs.FS} }

func TestShippedProfiles(t *testing.T) {
	names, err := fs.Glob(siteconfigs.FS, "*.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"generic-openmpi.toml", "intel-oneccl.toml", "intel-pip.toml", "local.toml", "mpich.toml"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Fatalf("embedded profiles (-want +got):\n%s", diff)
	}
	for _, n := range names {
		name := strings.TrimSuffix(n, ".toml")
		t.Run(name, func(t *testing.T) {
			r, err := embeddedOnly().Resolve(name)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if r.Profile.Description == "" {
				t.Error("no description")
			}
			if r.Profile.MPI.Flavor == "" {
				t.Error("no flavor")
			}
			// The copy in the repository is the one embedded, and it checks
			// as a file on disk too.
			src, err := os.ReadFile(filepath.Join("..", "site-configs", n))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ParseFile(n, src); err != nil {
				t.Errorf("ParseFile: %v", err)
			}
		})
	}
}

func TestShippedProfileValues(t *testing.T) {
	get := func(name string) *Profile {
		t.Helper()
		r, err := embeddedOnly().Resolve(name)
		if err != nil {
			t.Fatal(err)
		}
		return &r.Profile
	}

	local := get("local")
	if diff := cmp.Diff(MPI{
		Flavor: mpirun.OpenMPI, Launcher: mpirun.ProgramMpirun, Binary: "mpirun.openmpi",
		Args: []string{"--bind-to", "none"}, AllowRunAsRoot: true, Oversubscribe: true,
	}, local.MPI); diff != "" {
		t.Errorf("local [mpi] (-want +got):\n%s", diff)
	}
	if local.Slurm.Partition != "debug" {
		t.Errorf("local partition %q, want debug", local.Slurm.Partition)
	}

	intel := get("intel-oneccl")
	if intel.MPI.Flavor != mpirun.IntelMPI || intel.MPI.Launcher != mpirun.ProgramMpirun || intel.MPI.Bootstrap != "slurm" {
		t.Errorf("intel-oneccl [mpi] = %+v, want intelmpi, mpirun, bootstrap slurm", intel.MPI)
	}
	if len(intel.Env.Source) == 0 || intel.Env.Source[0].Script != "/opt/intel/oneapi/setvars.sh" {
		t.Errorf("intel-oneccl sources %+v, want setvars.sh first", intel.Env.Source)
	}
	for k, v := range map[string]string{"BATCHKIT_PIN": "1", "CCL_WORKER_COUNT": "1", "I_MPI_PIN_DOMAIN": "auto", "FI_PROVIDER": "tcp"} {
		if got := intel.Env.Vars[k]; got != v {
			t.Errorf("intel-oneccl %s = %q, want %q", k, got, v)
		}
	}

	// exec --pin computes these per rank; set in the profile they would win.
	for _, k := range []string{"CCL_WORKER_AFFINITY", "CCL_ATL_TRANSPORT", "CCL_PROCESS_LAUNCHER"} {
		if v, ok := intel.Env.Vars[k]; ok {
			t.Errorf("intel-oneccl sets %s = %q: exec --pin computes it", k, v)
		}
	}

	mpich := get("mpich")
	if mpich.MPI.Flavor != mpirun.MPICH || mpich.MPI.Launcher != mpirun.ProgramSrun || mpich.MPI.SrunMPI != "pmi2" {
		t.Errorf("mpich [mpi] = %+v, want mpich, srun, pmi2", mpich.MPI)
	}

	generic := get("generic-openmpi")
	if generic.MPI.Flavor != mpirun.OpenMPI || generic.MPI.AllowRunAsRoot || generic.MPI.Oversubscribe {
		t.Errorf("generic-openmpi [mpi] = %+v, want openmpi without root or oversubscription", generic.MPI)
	}
}

// Every broken profile fails with each of its problems at FILE:LINE:COL;
// testdata/broken/NAME.golden holds the exact lines (go test -update
// rewrites them). The table pins the essential part of each, so that a
// careless -update cannot lose it.
func TestBrokenProfiles(t *testing.T) {
	must := map[string][]string{
		"syntax.toml":            {"testdata/broken/syntax.toml:4:19: strings cannot contain newlines"},
		"unknown-key.toml":       {`unknown-key.toml:4:1: unknown key "slurm.partiton": did you mean "slurm.partition"?`, `unknown-key.toml:5:1: unknown key "slurm.qso": did you mean "slurm.qos"?`, `unknown-key.toml:9:1: unknown key "mpi.flavour": did you mean "mpi.flavor"?`},
		"wrong-type.toml":        {"wrong-type.toml:3:17: mpi.oversubscribe: want a boolean", "wrong-type.toml:4:8: mpi.args: want an array of strings, got string", "wrong-type.toml:7:8: rendezvous.port: want an integer, got string"},
		"unknown-flavor.toml":    {`unknown-flavor.toml:2:10: mpi.flavor: unknown MPI flavor "openmp"`},
		"bad-time.toml":          {`bad-time.toml:5:8: slurm.time: invalid time "1h"`},
		"cycle-a.toml":           {"cycle-b.toml:2:11: extends cycle: cycle-a → cycle-b → cycle-a"},
		"extends-missing.toml":   {`extends-missing.toml:2:11: extends: profile "intel-onecl" not found in testdata/broken, the embedded profiles: did you mean "intel-oneccl"?`},
		"cross.toml":             {"cross.toml:5:12: mpi.srun_mpi: Open MPI under srun needs --mpi=pmix", "cross.toml:6:13: mpi.bootstrap: \"ssh\" is not an Open MPI plm component", "cross.toml:6:13: mpi.bootstrap: srun takes no bootstrap"},
		"no-flavor.toml":         {"testdata/broken/no-flavor.toml: no MPI flavor"},
		"srun-mpi-launcher.toml": {"srun-mpi-launcher.toml:5:12: mpi.srun_mpi: srun's --mpi plugin needs launcher srun, and this profile's launcher is mpirun"},
		"many.toml": {
			`many.toml:3:1: unknown key "partition": did you mean "slurm.partition"?`,
			`many.toml:6:8: slurm.time: invalid time "25:61:00"`,
			`many.toml:7:17: slurm.extra_sbatch[0]: "#SBATCH --exclusive": write the option without "#SBATCH"`,
			`many.toml:8:12: slurm.modules[0]`,
			`many.toml:12:12: mpi.launcher: unknown launcher "torchrun"`,
			`many.toml:13:21: mpi.allow_run_as_root is an Open MPI option`,
			`many.toml:14:12: mpi.srun_mpi: unknown srun --mpi plugin "pmix3"`,
			`many.toml:21:10: env.source[1].script: "setvars.sh": want an absolute path`,
			`many.toml:22:1: unknown key "env.source[1].arg": did you mean "env.source[1].args"?`,
			`many.toml:25:1: env.vars.1BAD: "1BAD" is not a valid environment variable name`,
			`many.toml:26:20: env.vars.CCL_WORKER_COUNT: want a string, got integer 1 (quote it: "1")`,
			`many.toml:27:15: env.vars.MASTER_PORT: batchkit sets MASTER_PORT`,
			`many.toml:30:1: unknown key "env.I_MPI_DEBUG": variables go under [env.vars]`,
			`many.toml:33:15: rendezvous.port_policy: unknown port policy "random"`,
			`many.toml:34:8: rendezvous.port: port 80 out of range`,
		},
	}
	files, err := filepath.Glob("testdata/broken/*.toml")
	if err != nil {
		t.Fatal(err)
	}
	loader := &Loader{Dirs: []string{"testdata/broken"}, Embedded: siteconfigs.FS}
	for _, path := range files {
		base := filepath.Base(path)
		if base == "cycle-b.toml" {
			continue // the other half of cycle-a
		}
		t.Run(base, func(t *testing.T) {
			_, err := loader.Resolve(path)
			if err == nil {
				t.Fatal("no error")
			}
			var me *multierror.Error
			if !errors.As(err, &me) {
				t.Fatalf("error %T, want a *multierror.Error", err)
			}
			var lines []string
			for _, e := range Problems(err) {
				var p *Problem
				if !errors.As(e, &p) {
					t.Errorf("problem %T, want *Problem", e)
				}
				lines = append(lines, e.Error())
			}
			// The error's own message is the same list, one a line.
			if got := err.Error(); got != strings.Join(lines, "\n") {
				t.Errorf("err.Error() = %q, want the problems one a line", got)
			}
			got := strings.Join(lines, "\n") + "\n"

			wantLines, ok := must[base]
			if !ok {
				t.Fatalf("add %s to the table", base)
			}
			if len(wantLines) > len(lines) {
				t.Errorf("%d problems, want at least %d:\n%s", len(lines), len(wantLines), got)
			}
			for _, w := range wantLines {
				if !strings.Contains(got, w) {
					t.Errorf("missing %q in:\n%s", w, got)
				}
			}

			golden := strings.TrimSuffix(path, ".toml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// "many.toml" reports all its problems, in file order.
func TestProblemsInFileOrder(t *testing.T) {
	src, err := os.ReadFile("testdata/broken/many.toml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ParseFile("many.toml", src)
	ps := Problems(err)
	if len(ps) < 15 {
		t.Fatalf("%d problems, want every one of 15:\n%v", len(ps), err)
	}
	last := 0
	for _, e := range ps {
		p := e.(*Problem)
		if p.Line < last {
			t.Errorf("problem at line %d after line %d: not in file order", p.Line, last)
		}
		last = p.Line
	}
}

func TestCheckTime(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" for valid, else part of the error
	}{
		{"30", ""},
		{"0", ""},
		{"90:00", ""},
		{"05:30", ""},
		{"48:00:00", ""},
		{"1-0", ""},
		{"2-12", ""},
		{"1-12:30", ""},
		{"1-12:30:15", ""},
		{"UNLIMITED", ""},
		{"unlimited", ""},
		{"INFINITE", ""},
		{"", "want minutes"},
		{"1h", "want minutes"},
		{"1:2:3:4", "want minutes"},
		{"-5", "want minutes"},
		{"1-", "want minutes"},
		{"1-2:3:4:5", "want minutes"},
		{"10:60", "seconds must be below 60"},
		{"1:60:00", "minutes and seconds must be below 60"},
		{"1:00:60", "minutes and seconds must be below 60"},
		{"1-24", "hours must be below 24"},
		{"1-12:60", "minutes and seconds must be below 60"},
		{"1.5", "want minutes"},
		{" 30", "want minutes"},
		{"9999999999", "want minutes"},
	}
	for _, tt := range tests {
		err := CheckTime(tt.in)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckTime(%q) = %v, want ok", tt.in, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("CheckTime(%q) = %v, want an error containing %q", tt.in, err, tt.want)
		}
	}
}

func TestSuggest(t *testing.T) {
	keys := []string{"partition", "account", "qos", "time", "constraint", "extra_sbatch", "modules"}
	tests := []struct{ in, want string }{
		{"partiton", "partition"},
		{"partion", "partition"},
		{"Partition", "partition"},
		{"qso", "qos"},
		{"tme", "time"},
		{"acount", "account"},
		{"module", "modules"},
		{"extra", ""},
		{"nodes", ""},
		{"x", ""},
	}
	for _, tt := range tests {
		if got := suggest(tt.in, keys); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if d := editDistance("qso", "qos"); d != 1 {
		t.Errorf("editDistance(qso, qos) = %d, want 1 (a swap)", d)
	}
	if d := editDistance("kitten", "sitting"); d != 3 {
		t.Errorf("editDistance(kitten, sitting) = %d, want 3", d)
	}
}

func TestKeys(t *testing.T) {
	want := []string{
		"extends", "description", "templates",
		"slurm.partition", "slurm.account", "slurm.qos", "slurm.time", "slurm.constraint", "slurm.requeue", "slurm.extra_sbatch", "slurm.modules",
		"mpi.flavor", "mpi.launcher", "mpi.binary", "mpi.args", "mpi.bootstrap", "mpi.srun_mpi", "mpi.allow_run_as_root", "mpi.oversubscribe",
		"env.source", "env.oneccl_bindings", "env.python", "env.intel_wheels", "env.vars.NAME",
		"rendezvous.port_policy", "rendezvous.port",
	}
	if diff := cmp.Diff(want, Keys()); diff != "" {
		t.Errorf("Keys (-want +got):\n%s", diff)
	}
}

// The schema documentation names every key.
func TestREADMEDocumentsEveryKey(t *testing.T) {
	readme, err := os.ReadFile("../site-configs/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range Keys() {
		last := k[strings.LastIndexByte(k, '.')+1:]
		if k == "env.vars.NAME" {
			last = "vars"
		}
		if !strings.Contains(string(readme), "| `"+last+"` |") {
			t.Errorf("site-configs/README.md has no table row for %s", k)
		}
	}
}

// The README's examples are valid profiles, and layer as it says.
func TestREADMEExamples(t *testing.T) {
	readme, err := os.ReadFile("../site-configs/README.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, part := range strings.Split(string(readme), "```toml\n")[1:] {
		blocks = append(blocks, part[:strings.Index(part, "```")])
	}
	if len(blocks) != 3 {
		t.Fatalf("%d toml blocks in README.md, want 3 (env.source, ourcluster, mine)", len(blocks))
	}
	if _, err := ParseFile("fragment.toml", []byte(blocks[0])); err != nil {
		t.Errorf("[[env.source]] example: %v", err)
	}
	dir := t.TempDir()
	// The templates directory must exist; this machine has no /etc/batchkit.
	const etcTemplates = "/etc/batchkit/templates/ourcluster"
	if !strings.Contains(blocks[1], etcTemplates) {
		t.Fatalf("ourcluster example has no templates = %q", etcTemplates)
	}
	templates := filepath.Join(dir, "templates")
	if err := os.Mkdir(templates, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "ourcluster.toml", strings.Replace(blocks[1], etcTemplates, templates, 1))
	write(t, dir, "mine.toml", blocks[2])
	r, err := (&Loader{Dirs: []string{dir}, Embedded: siteconfigs.FS}).Resolve("mine")
	if err != nil {
		t.Fatal(err)
	}
	for key, from := range map[string]string{
		"slurm.partition":           "mine.toml",
		"slurm.account":             "ourcluster.toml",
		"env.vars.I_MPI_PIN_DOMAIN": "embedded:intel-oneccl.toml",
		"env.vars.FI_PROVIDER":      "ourcluster.toml",
		"env.vars.CCL_LOG_LEVEL":    "mine.toml",
	} {
		o, ok := r.Origin(key)
		if !ok || !strings.HasSuffix(o.Source, from) {
			t.Errorf("%s from %v, want %s", key, o, from)
		}
	}
	if r.Profile.Templates != templates {
		t.Errorf("templates = %q", r.Profile.Templates)
	}
}

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// What show prints is a profile that reads back to the same values.
func TestWriteTOMLRoundTrip(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "odd.toml", `description = "quotes \" and \\ and tabs\t"
extends = "intel-oneccl"
templates = "tmpl"

[slurm]
modules = ["a/1", "b/2"]
extra_sbatch = []

[env.vars]
"WEIRD_1" = "line1\nline2"
EMPTY = ""
`)
	if err := os.Mkdir(filepath.Join(dir, "tmpl"), 0o755); err != nil {
		t.Fatal(err)
	}
	loader := &Loader{Dirs: []string{dir}, Embedded: siteconfigs.FS}
	for _, name := range []string{"local", "generic-openmpi", "intel-oneccl", "mpich", "odd"} {
		t.Run(name, func(t *testing.T) {
			r, err := loader.Resolve(name)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			if err := r.WriteTOML(&b); err != nil {
				t.Fatal(err)
			}
			f, err := ParseFile(filepath.Join(dir, "shown.toml"), []byte(b.String()))
			if err != nil {
				t.Fatalf("%v\n%s", err, b.String())
			}
			want := r.Profile
			if diff := cmp.Diff(want, f.Profile); diff != "" {
				t.Errorf("read back (-want +got):\n%s\n%s", diff, b.String())
			}
		})
	}
}

// Switched to another flavor, an Open MPI profile's allow_run_as_root and
// oversubscribe are ignored, and show leaves them out: its output must pass
// the checks of a file, which reject them next to another flavor.
func TestWriteTOMLAfterFlavorSwitch(t *testing.T) {
	loader := &Loader{Embedded: siteconfigs.FS}
	r, err := loader.Resolve("local")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Profile.MPI.AllowRunAsRoot && !r.Profile.MPI.Oversubscribe {
		t.Skip("the local profile sets neither Open MPI option")
	}
	if err := r.Set("mpi.flavor", "mpich", CommandLine); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := r.WriteTOML(&b); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseFile("shown.toml", []byte(b.String())); err != nil {
		t.Errorf("show's output is not a valid profile: %v\n%s", err, b.String())
	}
	if strings.Contains(b.String(), "allow_run_as_root") || strings.Contains(b.String(), "oversubscribe") {
		t.Errorf("Open MPI options under mpich:\n%s", b.String())
	}
}

// Decoding is strict about case too: TOML keys are case-sensitive.
func TestKeysAreCaseSensitive(t *testing.T) {
	_, err := ParseFile("p.toml", []byte("[slurm]\nPartition = \"x\"\n"))
	if err == nil || !strings.Contains(err.Error(), `p.toml:2:1: unknown key "slurm.Partition": did you mean "slurm.partition"?`) {
		t.Errorf("got %v", err)
	}
	// The toml package itself matches keys case-insensitively; the exact
	// key's value must win every time, whatever the map order.
	src := []byte("[slurm]\npartition = \"exact\"\nPARTITION = 5\n[Slurm]\npartition = \"other\"\n")
	for range 20 {
		f, err := ParseFile("p.toml", src)
		want := "p.toml:3:1: unknown key \"slurm.PARTITION\": did you mean \"slurm.partition\"?\n" +
			"p.toml:4:2: unknown key \"Slurm\": did you mean \"slurm\"?"
		if err == nil || err.Error() != want {
			t.Fatalf("got %v, want\n%s", err, want)
		}
		if f.Profile.Slurm.Partition != "exact" {
			t.Fatalf("partition = %q, want exact", f.Profile.Slurm.Partition)
		}
	}
}

func TestTemplatesRelativeToProfile(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "tmpl"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := write(t, dir, "site.toml", "templates = \"tmpl\"\n[mpi]\nflavor = \"mpich\"\n")
	src, _ := os.ReadFile(p)
	f, err := ParseFile(p, src)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "tmpl"); f.Profile.Templates != want {
		t.Errorf("templates = %q, want %q", f.Profile.Templates, want)
	}
	// Not so for a profile without a directory.
	_, ps := parse("e", "embedded:e.toml", "", []byte(`templates = "tmpl"`))
	if err := ps.err(); err == nil || !strings.Contains(err.Error(), "embedded:e.toml:1:13: templates: an embedded profile needs an absolute path") {
		t.Errorf("embedded relative templates: %v", err)
	}
}

func TestProfileFieldsHaveTags(t *testing.T) {
	var check func(reflect.Type)
	check = func(rt reflect.Type) {
		for i := 0; i < rt.NumField(); i++ {
			f := rt.Field(i)
			if f.Tag.Get("toml") == "" {
				t.Errorf("%s.%s has no toml tag", rt.Name(), f.Name)
			}
			if f.Type.Kind() == reflect.Struct {
				check(f.Type)
			}
		}
	}
	check(reflect.TypeOf(Profile{}))
	check(reflect.TypeOf(Script{}))
}

// The checks of one file catch what the sbatch command would otherwise
// refuse later, without a file and line to point at.
func TestFileChecks(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "tmpl"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "plain-file", "")
	const mpi = "[mpi]\nflavor = \"mpich\"\n"
	tests := []struct {
		name string
		src  string
		want []string // problems, with the profile's directory as DIR
	}{
		{"extra_sbatch long forms", mpi + "[slurm]\nextra_sbatch = [\"--exclusive\", \"--gres=gpu:1\", \"--comment hi\"]\n", nil},
		{"extra_sbatch short form", mpi + "[slurm]\nextra_sbatch = [\"-x\"]\n", []string{
			`DIR/p.toml:4:17: slurm.extra_sbatch[0]: sbatch directive "-x": want the long form --flag=value`,
		}},
		{"extra_sbatch no option name", mpi + "[slurm]\nextra_sbatch = [\"--exclusive\", \"--=x\"]\n", []string{
			`DIR/p.toml:4:32: slurm.extra_sbatch[1]: sbatch directive "--=x": "" is not an option name`,
		}},
		{"extra_sbatch NUL", mpi + "[slurm]\nextra_sbatch = [\"--comment=a\\u0000b\"]\n", []string{
			`DIR/p.toml:4:17: slurm.extra_sbatch[0]: "--comment=a\u0000b" contains a NUL byte, which an #SBATCH line cannot carry`,
		}},
		{"requeue", mpi + "[slurm]\nrequeue = true\nextra_sbatch = [\"--exclusive\"]\n", nil},
		{"requeue and --no-requeue", mpi + "[slurm]\nrequeue = true\nextra_sbatch = [\"--no-requeue\"]\n", []string{
			`DIR/p.toml:4:11: slurm.requeue = true, and slurm.extra_sbatch has "--no-requeue": choose one`,
		}},
		{"requeue quoted", mpi + "[slurm]\nrequeue = \"true\"\n", []string{
			`DIR/p.toml:4:11: slurm.requeue: want a boolean (true or false), got string "true" (drop the quotes)`,
		}},
		{"setvars.sh with --force", mpi + "[env]\nsource = [{ script = \"/opt/intel/oneapi/setvars.sh\", args = [\"--config\", \"c.txt\", \"--force\"] }]\n", nil},
		{"setvars.sh without --force", mpi + "[env]\nsource = [{ script = \"/opt/intel/oneapi/setvars.sh\" }]\n", []string{
			`DIR/p.toml:4:22: env.source[0].script: "/opt/intel/oneapi/setvars.sh" needs args = ["--force"]: without it, a job submitted from a shell that already sourced oneAPI (SETVARS_COMPLETED=1) stops at this line`,
		}},
		{"templates relative dir", "templates = \"tmpl\"\n" + mpi, nil},
		// Not checked when loading: such directories often exist only where
		// jobs are submitted (sbatch names the key when it cannot read it).
		{"templates missing", "templates = \"no-such-dir\"\n" + mpi, nil},
		{"PATH is the login environment's", mpi + "[env.vars]\nPATH = \"/opt/x/bin\"\n", []string{
			"DIR/p.toml:4:8: env.vars.PATH: every job already has PATH (from the login environment), and a value the job has is kept: change it in an env.source script or a module instead",
		}},
		{"BATCHKIT_JOB_TOKEN is a secret", mpi + "[env.vars]\nBATCHKIT_JOB_TOKEN = \"s3cret\"\n", []string{
			"DIR/p.toml:4:22: env.vars.BATCHKIT_JOB_TOKEN: batchkit sets BATCHKIT_JOB_TOKEN for every rank: a profile cannot",
		}},
		{"var with a line break", mpi + "[env.vars]\nA = \"x\\ny\"\n", nil},
		{"var with NUL", mpi + "[env.vars]\nA = \"ok\"\nB = \"a\\u0000b\"\n", []string{
			`DIR/p.toml:5:5: env.vars.B: "a\u0000b" contains a NUL byte, which no program can receive`,
		}},
		{"srun_mpi with srun", mpi + "launcher = \"srun\"\nsrun_mpi = \"pmi2\"\n", nil},
		{"srun_mpi with mpirun", mpi + "launcher = \"mpirun\"\nsrun_mpi = \"pmi2\"\n", []string{
			"DIR/p.toml:4:12: mpi.srun_mpi: srun's --mpi plugin needs launcher srun, and this profile's launcher is mpirun",
		}},
		// Without a launcher in the file, the merged profile decides
		// (TestSrunMPIFollowsLauncher).
		{"srun_mpi alone", mpi + "srun_mpi = \"pmi2\"\n", nil},
		// A value of another type is that one problem, not also "empty"
		// (issue 24 item 13).
		{"extends an integer", "extends = 5\n" + mpi, []string{
			`DIR/p.toml:1:11: extends: want a string, got integer 5 (quote it: "5")`,
		}},
		{"extends a list", "extends = [\"local\"]\n" + mpi, []string{
			`DIR/p.toml:1:11: extends: want a string, got an array`,
		}},
		// Columns count from after a byte order mark, as an editor shows them.
		{"byte order mark", "\xef\xbb\xbfdescription = 5\n" + mpi, []string{
			`DIR/p.toml:1:15: description: want a string, got integer 5 (quote it: "5")`,
		}},
		{"extends empty", "extends = \" \"\n" + mpi, []string{
			`DIR/p.toml:1:11: extends: empty: name a profile or a path`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseFile(filepath.Join(dir, "p.toml"), []byte(tt.src))
			var got []string
			for _, e := range Problems(err) {
				got = append(got, strings.ReplaceAll(e.Error(), dir, "DIR"))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFixedPort(t *testing.T) {
	for _, tc := range []struct {
		r    Rendezvous
		want int
	}{
		{Rendezvous{PortPolicy: PortFixed, Port: 12345}, 12345},
		{Rendezvous{PortPolicy: PortFromJobID, Port: 12345}, 0},
		{Rendezvous{PortPolicy: PortFixed}, 0},
	} {
		if got := tc.r.FixedPort(); got != tc.want {
			t.Errorf("%+v: FixedPort() = %d, want %d", tc.r, got, tc.want)
		}
	}
}
