package mpirun

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/internal/closed"
)

// Program is the program that starts the ranks: a flavor's mpirun or
// mpiexec (for MVAPICH2 they differ: mpirun_rsh vs its Hydra mpiexec), or
// srun, which starts them as a Slurm step through a PMI plugin. It is not
// topology.Launcher, which says what started this process. A profile's
// mpi.launcher key and the --launcher flag name a Program: the words stay
// for users, who call it the launcher.
type Program string

const (
	ProgramMpirun  Program = "mpirun"
	ProgramMpiexec Program = "mpiexec"
	ProgramSrun    Program = "srun"
)

// Programs lists every valid Program.
var Programs = []Program{ProgramMpirun, ProgramMpiexec, ProgramSrun}

// ParseProgram validates s; the error calls it a launcher, as users do.
func ParseProgram(s string) (Program, error) { return closed.Parse("launcher", s, Programs) }

// UnmarshalText rejects unknown programs (a profile's mpi.launcher).
func (p *Program) UnmarshalText(b []byte) error {
	return closed.Unmarshal(p, "launcher", b, Programs)
}

// Host is one host of a launch.
type Host struct {
	Name  string
	Slots int // ranks this host takes; 0 means unspecified
}

// Spec is everything Command needs to build a launch command line.
type Spec struct {
	Flavor   Flavor  // may be empty only with Launcher srun (then no --mpi default)
	Launcher Program // mpirun (default), mpiexec or srun
	Binary   string  // launcher binary; empty: the flavor's first default name
	NP       int     // total ranks, >= 1; 0 for srun in an allocation: the allocation's
	PPN      int     // ranks per node; 0: the launcher decides
	Hosts    []Host  // hosts on the command line; exclusive with Hostfile
	Hostfile string  // path of a hostfile in a format the launcher reads
	// HostfileSlots says the hostfile's lines carry slot counts (host:N):
	// a launcher whose hostfile option ignores counts (Intel MPI's -f)
	// then gets it through the option that honours them (-machinefile).
	HostfileSlots bool
	// Env is exported to every rank with the flavor's own mechanism, in
	// sorted key order. Its values are on the launcher's command line, which
	// every user of the machine can read (ps): no secrets.
	Env map[string]string
	// ForwardEnv names variables of the launcher's own environment (the
	// process that runs the command, not its command line) that every rank
	// gets, in order: the way to hand ranks a secret such as the job token.
	// Only names are on the command line; a launcher that takes values only
	// there (MVAPICH2's mpirun_rsh) refuses them.
	ForwardEnv     []string
	ExtraArgs      []string // passed to the launcher verbatim, before the program
	Bootstrap      string   // how daemons start: Hydra -bootstrap, Open MPI --mca plm
	SrunMPI        string   // srun --mpi plugin; empty: the flavor's default
	AllowRunAsRoot bool     // Open MPI only; the others do not refuse root
	Oversubscribe  bool     // Open MPI only; the others oversubscribe by default
	InAllocation   bool     // inside a Slurm allocation: Hydra bootstraps through slurm
	Program        []string // the program and its arguments, non-empty
	// Wrapped is how many of Program's leading words are a wrapper the
	// caller put before the user's program (batchkit exec --): errors
	// count the user's arguments as the user wrote them.
	Wrapped int
}

// envPlace is where a syntax puts the rank environment.
type envPlace int

const (
	envFlags         envPlace = iota // among the launcher's options (-x K=V, -genv K V)
	envBeforeProgram                 // K=V arguments right before the program (mpirun_rsh)
	envOfLauncher                    // set on the launcher process itself: env K=V srun --export=ALL
)

// lineStyle is one of the hostfile line forms ParseHostfile reads.
type lineStyle int

const (
	styleBare  lineStyle = iota // host
	styleColon                  // host:N (Hydra, MVAPICH2)
	styleSlots                  // host slots=N [max_slots=M] (Open MPI)
)

// envFilter is a launcher option that narrows which variables of the
// launcher's own environment reach the ranks (Hydra -genvlist, srun
// --export): given in ExtraArgs, it decides whether ForwardEnv names still
// arrive.
type envFilter struct {
	opt  string // the option as written, e.g. "--export"; with anyDashes, without dashes
	list bool   // takes a comma list of names (next argument or after "="); else forwards none
	all  string // a list entry that means the whole environment (srun's ALL); "": none
}

// syntax is one launcher's command-line dialect, as data. Templates are
// space-separated argument lists; placeholders are replaced inside each
// argument, so a value never splits into several arguments:
// {N} a count, {HOSTS} the host list, {H}/{S} a host name and its slots,
// {F} a hostfile path, {K}/{V} a variable's name and value, {B} a bootstrap,
// {P} an srun MPI plugin. An empty template means the launcher has no such
// option.
type syntax struct {
	name      string // in error messages
	np        string
	ppn       string
	hosts     string // {HOSTS}: entries joined by ","
	hostSlots bool   // an entry may carry slots as {H}:{S}
	hostfile  string
	// slotsFile is the hostfile option when the file's lines carry slot
	// counts and hostfile's option ignores them; "": hostfile reads them.
	slotsFile string
	line      string // hostfile line of a host with slots; without slots a line is just the name
	reads     []lineStyle
	env       string
	envAt     envPlace
	// How a ForwardEnv name {K} reaches the ranks with its value taken from
	// the launcher's environment: forward is the option per name, among the
	// launcher's options; inherits means the launcher passes its whole
	// environment to every rank by default, so a name needs no option,
	// unless one of envFilters in ExtraArgs narrows it. Neither: the
	// launcher cannot forward a value without putting it on a command line.
	forward       string
	inherits      bool
	envFilters    []envFilter
	anyDashes     bool // options may be written with any number of leading dashes (Hydra)
	bootstrap     string
	allocBoot     string // bootstrap inside a Slurm allocation when none is given
	slurmBoot     string // the bootstrap that starts daemons through Slurm: only inside an allocation
	allowRoot     string
	oversubscribe string
	srunMPI       string
	fixed         string            // always passed, after the generated options
	fixedEnv      map[string]string // always set, under Spec.Env (which wins)
}

var (
	openMPISyntax = syntax{
		name:      "Open MPI mpirun",
		np:        "-np {N}",
		ppn:       "--map-by ppr:{N}:node",
		hosts:     "--host {HOSTS}",
		hostSlots: true,
		hostfile:  "--hostfile {F}",
		line:      "{H} slots={S}",
		reads:     []lineStyle{styleBare, styleSlots},
		env:       "-x {K}={V}",
		// -x NAME: mpirun copies the value from its own environment and
		// sends it to remote daemons over its own connection; without it
		// remote ranks get no variable of mpirun's environment.
		forward:       "-x {K}",
		bootstrap:     "--mca plm {B}",
		slurmBoot:     "slurm",
		allowRoot:     "--allow-run-as-root",
		oversubscribe: "--oversubscribe",
	}
	// MPICH's Hydra (also MVAPICH2's mpiexec). Inside an allocation it is
	// told to start its proxies with srun. It passes its whole environment
	// to every rank by default (-genvall), sent to remote proxies over its
	// control connection, not their command lines. Forwarded names need no
	// option: -genvlist NAME would switch that default off and leave remote
	// ranks with nothing else of the launcher's environment (PATH,
	// LD_LIBRARY_PATH ...), and Hydra refuses a second -genvlist or
	// -genvall ("duplicate environment setting").
	hydraSyntax = syntax{
		name:      "Hydra mpiexec",
		np:        "-n {N}",
		ppn:       "-ppn {N}",
		hosts:     "-hosts {HOSTS}",
		hostSlots: true,
		hostfile:  "-f {F}",
		line:      "{H}:{S}",
		reads:     []lineStyle{styleBare, styleColon},
		env:       "-genv {K} {V}",
		envAt:     envFlags,
		inherits:  true,
		envFilters: []envFilter{
			{opt: "genvnone"}, {opt: "genvlist", list: true}, {opt: "envnone"}, {opt: "envlist", list: true},
		},
		anyDashes: true,
		bootstrap: "-bootstrap {B}",
		allocBoot: "slurm",
		slurmBoot: "slurm",
	}
	// Intel MPI's Hydra: as MPICH's, but -hosts is documented as plain
	// names only, and so is -f/-hostfile ("if a host name is repeated, this
	// name is used only once": host:N counts are ignored, -ppn places the
	// ranks). Per-host slots go through a machine file: -machinefile,
	// host:N lines.
	//
	// -disable-auto-cleanup: Intel's Hydra, unlike MPICH's, SIGKILLs the
	// ranks of every other node (and exits 255) as soon as all ranks of one
	// node have exited and one of them non-zero; so a preempted job whose
	// first ranks exit 75 loses the others, rank 0's checkpoint with them,
	// and is not requeued (measured over node1+node2, docs/intel-wheels.md).
	// A rank that fails ends the job through batchkit exec's watch instead
	// (launch/failfast), as under MPICH's Hydra.
	intelSyntax = func() syntax {
		s := hydraSyntax
		s.name = "Intel MPI mpiexec.hydra"
		s.hostSlots = false
		s.slotsFile = "-machinefile {F}"
		s.fixed = "-disable-auto-cleanup"
		return s
	}()
	// MVAPICH2's mpirun_rsh: hosts only in a hostfile (positional hosts
	// would have to be listed once per rank), environment as K=V
	// arguments before the program, -launcher rsh|ssh|srun. It has no way
	// to pass a value but its command line (even -export copies the
	// environment onto the remote shell's command line), so it forwards
	// nothing: MVAPICH2's mpiexec (Hydra) or srun can.
	rshSyntax = syntax{
		name:      "MVAPICH2 mpirun_rsh",
		np:        "-np {N}",
		ppn:       "-ppn {N}",
		hostfile:  "-hostfile {F}",
		line:      "{H}:{S}",
		reads:     []lineStyle{styleBare, styleColon},
		env:       "{K}={V}",
		envAt:     envBeforeProgram,
		bootstrap: "-launcher {B}",
		slurmBoot: "srun",
	}
	// srun: environment through srun's own environment and --export=ALL
	// (a --export=ALL,K=V list would break on commas in values), which
	// also carries every forwarded name; a later --export in ExtraArgs
	// wins, so it must keep them. No hostfile; per-host slots do not exist
	// (the allocation decides). SLURM_KILL_BAD_EXIT=1, srun's
	// --kill-on-bad-exit=1 as a variable: a rank that fails ends the step,
	// as Open MPI's mpirun does (Slurm's default lets the others run on),
	// and the ranks inherit it, so batchkit exec knows srun stops the step
	// and does not watch (launch/failfast); a flag leaves no trace there.
	// --env SLURM_KILL_BAD_EXIT=0 or a --kill-on-bad-exit=0 in ExtraArgs wins.
	srunSyntax = syntax{
		name:       "srun",
		np:         "-n {N}",
		ppn:        "--ntasks-per-node={N}",
		hosts:      "--nodelist={HOSTS}",
		env:        "{K}={V}",
		envAt:      envOfLauncher,
		inherits:   true,
		envFilters: []envFilter{{"--export", true, "ALL"}},
		srunMPI:    "--mpi={P}",
		fixed:      "--export=ALL",
		fixedEnv:   map[string]string{envvars.SlurmKillBadExit: "1"},
	}
)

// launcherRow is one launcher of a flavor: the binary names to look for, in
// order, and the dialect it speaks.
type launcherRow struct {
	binaries []string
	syntax   *syntax
}

// flavorRow is everything batchkit knows about an MPI flavor. Adding a
// flavor is adding a row.
type flavorRow struct {
	name    string
	mpirun  launcherRow
	mpiexec launcherRow
	srunMPI string // srun --mpi plugin its ranks' PMI client speaks
	// srunNeeds, when set, is the prefix every srun --mpi plugin its ranks
	// can use starts with, and srunWhy says why (CheckSrunMPI).
	srunNeeds, srunWhy string
	// bootstraps are the values of a profile's mpi.bootstrap for the
	// flavor's launchers (CheckBootstrap).
	bootstraps *bootstrapSet
	// srunLibs: when srun starts the ranks directly through a plugin,
	// variables naming a library of Slurm's the ranks load, by plugin:
	// the variable and the library's file names (SrunLibEnv finds them).
	srunLibs map[string]srunLib
	// shieldUSR1: its Hydra's proxies, started by srun, catch no SIGUSR1,
	// and its mpirun is a shell script that catches none either
	// (ShieldUSR1).
	shieldUSR1 bool
}

// srunLib is a variable whose value is the path of one of Slurm's libraries.
type srunLib struct {
	name  string
	files []string // in the order to look for them
}

var flavorRows = map[Flavor]flavorRow{
	OpenMPI: {
		name:      "Open MPI",
		mpirun:    launcherRow{[]string{"mpirun.openmpi", "mpirun"}, &openMPISyntax},
		mpiexec:   launcherRow{[]string{"mpiexec.openmpi", "mpiexec"}, &openMPISyntax},
		srunMPI:   "pmix",
		srunNeeds: "pmix", srunWhy: "Open MPI 5 has no PMI-2 support",
		bootstraps: &openMPIBootstraps,
	},
	MPICH: {
		name:       "MPICH",
		mpirun:     launcherRow{[]string{"mpirun.mpich", "mpiexec.mpich", "mpiexec.hydra", "mpirun"}, &hydraSyntax},
		mpiexec:    launcherRow{[]string{"mpiexec.mpich", "mpiexec.hydra", "mpiexec"}, &hydraSyntax},
		srunMPI:    "pmi2",
		bootstraps: &hydraBootstraps,
	},
	IntelMPI: {
		name:       "Intel MPI",
		mpirun:     launcherRow{[]string{"mpirun", "mpiexec.hydra"}, &intelSyntax},
		mpiexec:    launcherRow{[]string{"mpiexec.hydra", "mpiexec"}, &intelSyntax},
		srunMPI:    "pmi2",
		bootstraps: &hydraBootstraps,
		// Intel MPI's own PMI client does not speak to slurmd: under srun
		// --mpi=pmi2 its ranks load Slurm's PMI-2 library (Debian's
		// libpmi2-0) from I_MPI_PMI_LIBRARY, else MPI_Init fails.
		srunLibs:   map[string]srunLib{"pmi2": {"I_MPI_PMI_LIBRARY", []string{"libpmi2.so.0", "libpmi2.so"}}},
		shieldUSR1: true,
	},
	MVAPICH: {
		name:       "MVAPICH2",
		mpirun:     launcherRow{[]string{"mpirun_rsh"}, &rshSyntax},
		mpiexec:    launcherRow{[]string{"mpiexec.hydra", "mpiexec"}, &hydraSyntax},
		srunMPI:    "pmi2",
		bootstraps: &hydraBootstraps,
	},
}

var srunRow = launcherRow{[]string{"srun"}, &srunSyntax}

// row returns the launcher row of spec's flavor and launcher.
func (s Spec) row() (launcherRow, error) {
	switch s.Launcher {
	case ProgramSrun:
		if s.Flavor != "" {
			if _, err := ParseFlavor(string(s.Flavor)); err != nil {
				return launcherRow{}, err
			}
		}
		return srunRow, nil
	case "", ProgramMpirun, ProgramMpiexec:
	default:
		_, err := ParseProgram(string(s.Launcher))
		return launcherRow{}, err
	}
	if s.Flavor == "" {
		return launcherRow{}, errors.New("no MPI flavor given")
	}
	f, err := ParseFlavor(string(s.Flavor))
	if err != nil {
		return launcherRow{}, err
	}
	if s.Launcher == ProgramMpiexec {
		return flavorRows[f].mpiexec, nil
	}
	return flavorRows[f].mpirun, nil
}

// Binaries returns the binary names a launcher of a flavor goes by, in the
// order to look for them on PATH.
func Binaries(f Flavor, launcher Program) []string {
	r, err := Spec{Flavor: f, Launcher: launcher}.row()
	if err != nil {
		return nil
	}
	return append([]string(nil), r.binaries...)
}

// DefaultSrunMPI is the srun --mpi plugin for ranks of flavor f.
func DefaultSrunMPI(f Flavor) string { return flavorRows[f].srunMPI }

// expand fills a template; see syntax.
func expand(tmpl string, vals ...string) []string {
	if tmpl == "" {
		return nil
	}
	r := strings.NewReplacer(vals...)
	fields := strings.Fields(tmpl)
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = r.Replace(f)
	}
	return out
}

// slotsOf is how many ranks host h takes: ppn when given (an explicit
// ranks-per-node wins over a host's own slots, as in DefaultNP, so that a
// launcher told to place ppn ranks on every node has the slots for them),
// else the host's own slots.
func slotsOf(h Host, ppn int) int {
	if ppn > 0 {
		return ppn
	}
	return h.Slots
}

// perHostSlots reports whether the hosts' own slot counts decide the
// placement: some host has slots and no ranks per node overrides them.
func (s Spec) perHostSlots() bool { return s.PPN == 0 && hasSlots(s.Hosts) }

func hasSlots(hosts []Host) bool {
	for _, h := range hosts {
		if h.Slots > 0 {
			return true
		}
	}
	return false
}

// CanForwardEnv reports whether spec's launcher can hand the ranks
// variables of its own environment (Spec.ForwardEnv) without their values
// on a command line. MVAPICH2's mpirun_rsh cannot.
func CanForwardEnv(spec Spec) bool {
	r, err := spec.row()
	return err == nil && (r.syntax.forward != "" || r.syntax.inherits)
}

// NeedsHostfile reports whether spec's hosts cannot go on its launcher's
// command line and must be written to a hostfile instead: mpirun_rsh takes
// hosts only from a file, and Intel MPI's -hosts cannot carry per-host
// slots.
func NeedsHostfile(spec Spec) bool {
	r, err := spec.row()
	if err != nil || len(spec.Hosts) == 0 || r.syntax.hostfile == "" {
		return false
	}
	return r.syntax.hosts == "" || (!r.syntax.hostSlots && spec.perHostSlots())
}

// BootstrapNeedsAllocation reports whether bootstrap b of spec's launcher
// starts the launcher's daemons through Slurm (Hydra -bootstrap slurm, Open
// MPI --mca plm slurm, mpirun_rsh -launcher srun), which works only inside
// a Slurm allocation.
func BootstrapNeedsAllocation(spec Spec, b string) bool {
	r, err := spec.row()
	return err == nil && b != "" && b == r.syntax.slurmBoot
}

// ShieldUSR1 reports whether a batch script must keep SIGUSR1, Slurm's
// preemption warning, from killing spec's launcher and the proxies it
// starts through srun (-bootstrap slurm): Intel MPI's hydra_pmi_proxy
// catches no SIGUSR1, so one sent to the job's steps (scancel
// --signal=USR1, sbatch --signal=USR1@T) killed the proxies and failed the
// step, and its mpirun is a shell script that dies of one sent to the batch
// step (scancel --full), losing mpiexec.hydra's exit status. The batch
// script then starts both with SIGUSR1 ignored (templates/sbatch.sh.tmpl);
// mpiexec.hydra and the ranks' batchkit exec catch it all the same.
func ShieldUSR1(spec Spec) bool {
	r, err := spec.row()
	return err == nil && spec.Launcher != ProgramSrun && flavorRows[spec.Flavor].shieldUSR1 &&
		spec.bootstrap(r.syntax) == r.syntax.slurmBoot
}

// bootstrap is the bootstrap spec's launcher gets: Spec.Bootstrap, else
// inside an allocation the syntax's allocBoot.
func (s Spec) bootstrap(sx *syntax) string {
	if s.Bootstrap == "" && s.InAllocation {
		return sx.allocBoot
	}
	return s.Bootstrap
}

// Command builds the launcher's argv for spec. It is a pure function:
// nothing is looked up, nothing runs. Every value is one argument; the
// caller quotes them (shquote.Join) only to print.
func Command(spec Spec) ([]string, error) {
	r, err := spec.row()
	if err != nil {
		return nil, err
	}
	sx := r.syntax
	if err := spec.validate(sx); err != nil {
		return nil, err
	}
	bin := spec.Binary
	if bin == "" {
		bin = r.binaries[0]
	}
	env := envArgs(spec, sx)
	var argv []string
	if sx.envAt == envOfLauncher && len(env) > 0 {
		argv = append(append(argv, "env"), env...)
	}
	argv = append(argv, bin)
	argv = append(argv, launcherArgs(spec, sx)...)
	argv = append(argv, layoutArgs(spec, sx)...)
	if sx.envAt == envFlags {
		argv = append(argv, env...)
	}
	for _, k := range spec.ForwardEnv {
		argv = append(argv, expand(sx.forward, "{K}", k)...)
	}
	argv = append(argv, expand(sx.fixed)...)
	argv = append(argv, spec.ExtraArgs...)
	if sx.envAt == envBeforeProgram {
		argv = append(argv, env...)
	}
	return append(argv, spec.Program...), nil
}

// envArgs sets the syntax's fixedEnv and spec.Env over it in the flavor's
// syntax, sorted by name.
func envArgs(spec Spec, sx *syntax) []string {
	env := map[string]string{}
	maps.Copy(env, sx.fixedEnv)
	maps.Copy(env, spec.Env)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, expand(sx.env, "{K}", k, "{V}", env[k])...)
	}
	return out
}

// launcherArgs: how the launcher itself runs (as root, oversubscribed,
// its bootstrap, srun's PMI plugin).
func launcherArgs(spec Spec, sx *syntax) []string {
	var argv []string
	if spec.AllowRunAsRoot {
		argv = append(argv, expand(sx.allowRoot)...)
	}
	if spec.Oversubscribe {
		argv = append(argv, expand(sx.oversubscribe)...)
	}
	if boot := spec.bootstrap(sx); boot != "" {
		argv = append(argv, expand(sx.bootstrap, "{B}", boot)...)
	}
	if sx.srunMPI != "" {
		plugin := spec.SrunMPI
		if plugin == "" && spec.Flavor != "" {
			plugin = DefaultSrunMPI(spec.Flavor)
		}
		if plugin != "" {
			argv = append(argv, expand(sx.srunMPI, "{P}", plugin)...)
		}
	}
	return argv
}

// layoutArgs: how many ranks, how many per host, on which hosts.
func layoutArgs(spec Spec, sx *syntax) []string {
	var argv []string
	if spec.NP > 0 {
		argv = append(argv, expand(sx.np, "{N}", strconv.Itoa(spec.NP))...)
	}
	if spec.PPN > 0 {
		argv = append(argv, expand(sx.ppn, "{N}", strconv.Itoa(spec.PPN))...)
	}
	if len(spec.Hosts) > 0 {
		entries := make([]string, len(spec.Hosts))
		for i, h := range spec.Hosts {
			entries[i] = h.Name
			if n := slotsOf(h, spec.PPN); n > 0 && sx.hostSlots {
				entries[i] += ":" + strconv.Itoa(n)
			}
		}
		argv = append(argv, expand(sx.hosts, "{HOSTS}", strings.Join(entries, ","))...)
	}
	if spec.Hostfile != "" {
		opt := sx.hostfile
		if spec.HostfileSlots && sx.slotsFile != "" {
			opt = sx.slotsFile
		}
		argv = append(argv, expand(opt, "{F}", spec.Hostfile)...)
	}
	return argv
}

func (s Spec) validate(sx *syntax) error {
	switch {
	case s.NP == 0 && s.Launcher == ProgramSrun && s.InAllocation:
		// srun inside a batch script takes the rank count from the
		// allocation; repeating it only invites disagreement.
	case s.NP < 1:
		return fmt.Errorf("number of ranks %d: must be at least 1", s.NP)
	case s.PPN < 0:
		return fmt.Errorf("ranks per node %d: must not be negative", s.PPN)
	case len(s.Program) == 0 || s.Program[0] == "":
		return errors.New("no program to launch")
	case len(s.Hosts) > 0 && s.Hostfile != "":
		return errors.New("hosts and a hostfile are exclusive")
	case s.Bootstrap != "" && sx.bootstrap == "":
		return fmt.Errorf("%s has no bootstrap option (bootstrap %q)", sx.name, s.Bootstrap)
	case s.SrunMPI != "" && sx.srunMPI == "":
		return fmt.Errorf("an srun MPI plugin (%q) needs launcher srun, not %s", s.SrunMPI, sx.name)
	case s.Hostfile != "" && sx.hostfile == "":
		return fmt.Errorf("%s takes no hostfile: pass the hosts instead", sx.name)
	}
	for _, h := range s.Hosts {
		if err := checkHostName(h.Name); err != nil {
			return err
		}
		if h.Slots < 0 {
			return fmt.Errorf("host %s: slots %d must not be negative", h.Name, h.Slots)
		}
	}
	if len(s.Hosts) > 0 && sx.hosts == "" {
		return fmt.Errorf("%s takes hosts only in a hostfile", sx.name)
	}
	if len(s.Hosts) > 0 && !sx.hostSlots && s.perHostSlots() && sx.hostfile != "" {
		return fmt.Errorf("%s cannot take per-host slots on the command line: use a hostfile", sx.name)
	}
	for k, v := range s.Env {
		if !ValidEnvName(k) {
			return fmt.Errorf("environment variable name %q: want letters, digits and _, not starting with a digit", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("environment variable %s: value contains a NUL byte", k)
		}
	}
	if err := s.validateForward(sx); err != nil {
		return err
	}
	for _, group := range [][]string{s.Program, s.ExtraArgs, {s.Binary, s.Hostfile, s.Bootstrap, s.SrunMPI}} {
		for _, a := range group {
			if strings.IndexByte(a, 0) >= 0 {
				return fmt.Errorf("argument %q contains a NUL byte", a)
			}
		}
	}
	// Open MPI, Hydra and srun all read a bare ":" anywhere on their
	// command line, even after the program, as the separator of another
	// program to launch (MPMD, heterogeneous steps): the rest of the
	// arguments would become a second program instead of reaching this one.
	for i, a := range s.Program {
		if a == ":" {
			what := fmt.Sprintf("program argument %d", i)
			switch {
			case s.Wrapped > 0 && i == s.Wrapped:
				what = "the program"
			case s.Wrapped > 0 && i > s.Wrapped:
				what = fmt.Sprintf("argument %d of %s", i-s.Wrapped, s.Program[s.Wrapped])
			}
			return fmt.Errorf("%s is \":\", which %s takes as the start of another program: pass it another way (a file or an environment variable)", what, sx.name)
		}
	}
	for _, v := range []struct{ what, val string }{{"bootstrap", s.Bootstrap}, {"srun MPI plugin", s.SrunMPI}} {
		if strings.ContainsAny(v.val, " \t\n") || strings.HasPrefix(v.val, "-") {
			return fmt.Errorf("%s %q: want a single word", v.what, v.val)
		}
	}
	return nil
}

// validateForward checks ForwardEnv: valid distinct names, none also in
// Env (its value would be on the command line after all), a launcher that
// can forward without a value on its command line, and no ExtraArgs option
// that would keep a name from the ranks.
func (s Spec) validateForward(sx *syntax) error {
	if len(s.ForwardEnv) == 0 {
		return nil
	}
	seen := map[string]bool{}
	for _, k := range s.ForwardEnv {
		if !ValidEnvName(k) {
			return fmt.Errorf("forwarded environment variable name %q: want letters, digits and _, not starting with a digit", k)
		}
		if seen[k] {
			return fmt.Errorf("environment variable %s forwarded twice", k)
		}
		seen[k] = true
		if _, ok := s.Env[k]; ok {
			return fmt.Errorf("environment variable %s is both forwarded and set on the command line: forward it only", k)
		}
	}
	names := strings.Join(s.ForwardEnv, ",")
	if sx.forward == "" && !sx.inherits {
		return fmt.Errorf("%s passes environment values only on command lines, which every user can read: cannot forward %s; use the mpiexec or srun launcher", sx.name, names)
	}
	for i := 0; i < len(s.ExtraArgs); i++ {
		arg := s.ExtraArgs[i]
		if !strings.HasPrefix(arg, "-") {
			continue // a value, not an option
		}
		opt, val, hasVal := strings.Cut(arg, "=")
		if sx.anyDashes {
			opt = strings.TrimLeft(opt, "-")
		}
		for _, f := range sx.envFilters {
			if opt != f.opt {
				continue
			}
			if !f.list {
				return fmt.Errorf("%s option %s passes no variable of the launcher's environment to the ranks, which need %s", sx.name, arg, names)
			}
			if !hasVal && i+1 < len(s.ExtraArgs) {
				i++
				val = s.ExtraArgs[i]
			}
			listed := map[string]bool{}
			for _, n := range strings.Split(val, ",") {
				listed[n] = true
			}
			if f.all != "" && listed[f.all] {
				continue
			}
			for _, k := range s.ForwardEnv {
				if !listed[k] {
					return fmt.Errorf("%s option %s passes only the variables it lists to the ranks (%q): add %s to it", sx.name, arg, val, k)
				}
			}
		}
	}
	return nil
}

// ValidEnvName reports whether k is a portable environment variable name:
// [A-Za-z_][A-Za-z0-9_]*.
func ValidEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
