package mpirun

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFlavorFromName(t *testing.T) {
	for name, want := range map[string]Flavor{
		"mpirun.openmpi":                          OpenMPI,
		"/usr/bin/mpiexec.openmpi":                OpenMPI,
		"/opt/ompi/bin/orterun":                   OpenMPI,
		"prterun":                                 OpenMPI,
		"mpirun.mpich":                            MPICH,
		"/usr/bin/mpiexec.mpich":                  MPICH,
		"mpirun_rsh":                              MVAPICH,
		"/opt/mvapich2/bin/mpirun_rsh":            MVAPICH,
		"/opt/intel/oneapi/mpi/latest/bin/mpirun": "", // the directory does not count
		"mpirun":                                  "",
		"mpiexec":                                 "",
		"mpiexec.hydra":                           "",
	} {
		got, ok := FlavorFromName(name)
		if got != want || ok != (want != "") {
			t.Errorf("FlavorFromName(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

// Version banners as the launchers print them.
var versions = map[string]string{
	"openmpi4-debian": "mpirun.openmpi (OpenRTE) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n",
	"openmpi5":        "mpirun (Open MPI) 5.0.3\n\nReport bugs to https://www.open-mpi.org/community/help/\n",
	"mpich":           "HYDRA build details:\n    Version:                                 4.0.2\n",
	"intel":           "Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: c2e19c2f3e)\nCopyright 2003-2023, Intel Corporation.\n",
	"mvapich":         "HYDRA build details:\n    Version:      3.2\n    Configure options: '--prefix=/opt/mvapich2' MVAPICH2 2.3.7\n",
	"srun":            "slurm 22.05.8\n",
}

func TestFlavorFromVersion(t *testing.T) {
	want := map[string]Flavor{
		"openmpi4-debian": OpenMPI, "openmpi5": OpenMPI, "mpich": MPICH, "intel": IntelMPI, "mvapich": MVAPICH, "srun": "",
	}
	for name, out := range versions {
		got, ok := FlavorFromVersion(out)
		if got != want[name] || ok != (want[name] != "") {
			t.Errorf("%s: FlavorFromVersion = %q, %v; want %q", name, got, ok, want[name])
		}
	}
}

// hangs is a banner that stands for a launcher that never answers: its
// probe times out.
const hangs = "\x00hangs"

// fakeProbe is a PATH of name → version banner ("" = on PATH, no banner).
func fakeProbe(path map[string]string) (Probe, *[]string) {
	var asked []string
	return Probe{
		LookPath: func(name string) (string, error) {
			if _, ok := path[name]; ok {
				return "/bin/" + name, nil
			}
			return "", exec.ErrNotFound
		},
		Version: func(p string) (string, error) {
			asked = append(asked, p)
			for name, v := range path {
				if "/bin/"+name == p {
					switch v {
					case "":
						return "", errors.New("exit status 1")
					case hangs:
						return "", fmt.Errorf("%s --version: no answer: %w", p, context.DeadlineExceeded)
					}
					return v, nil
				}
			}
			return "", exec.ErrNotFound
		},
	}, &asked
}

func TestFindLauncher(t *testing.T) {
	debian := map[string]string{ // this machine: Debian alternatives, mpirun is Open MPI
		"mpirun.openmpi": versions["openmpi4-debian"], "mpirun.mpich": versions["mpich"],
		"mpiexec.mpich": versions["mpich"], "mpiexec.hydra": versions["mpich"],
		"mpirun": versions["openmpi4-debian"], "mpiexec": versions["openmpi4-debian"], "srun": versions["srun"],
	}
	intel := map[string]string{"mpirun": versions["intel"], "mpiexec.hydra": versions["intel"], "mpiexec": versions["intel"], "srun": versions["srun"]}
	tests := []struct {
		name       string
		path       map[string]string
		flavor     Flavor
		launcher   Program
		binary     string
		wantFlavor Flavor
		wantBin    string
		wantFound  bool
		wantErr    string
	}{
		{"autodetect debian", debian, "", "mpirun", "", OpenMPI, "mpirun.openmpi", true, ""},
		{"autodetect mpiexec", debian, "", "mpiexec", "", OpenMPI, "mpiexec", true, ""},
		{"autodetect intel", intel, "", "mpirun", "", IntelMPI, "mpirun", true, ""},
		{"autodetect mpich only", map[string]string{"mpirun.mpich": "", "mpiexec.hydra": versions["mpich"]}, "", "mpirun", "", MPICH, "mpirun.mpich", true, ""},
		{"autodetect mvapich", map[string]string{"mpirun_rsh": ""}, "", "mpirun", "", MVAPICH, "mpirun_rsh", true, ""},
		{"autodetect plain mpiexec", map[string]string{"mpiexec": versions["mpich"]}, "", "mpiexec", "", MPICH, "mpiexec", true, ""},
		{"nothing", map[string]string{}, "", "mpirun", "", "", "", false, "no MPI launcher found on PATH (looked for mpirun.openmpi, mpirun.mpich, mpirun, mpiexec.hydra, mpirun_rsh, mpiexec)"},
		{"unknown mpirun", map[string]string{"mpirun": "some other thing"}, "", "mpirun", "", "", "", false, "no MPI launcher found"},
		{"flavor mpich", debian, MPICH, "mpirun", "", MPICH, "mpirun.mpich", true, ""},
		{"flavor mpich mpiexec", debian, MPICH, "mpiexec", "", MPICH, "mpiexec.mpich", true, ""},
		// /usr/bin/mpirun is Open MPI's: not taken for Intel, and said so.
		{"flavor intel on debian", debian, IntelMPI, "mpirun", "", IntelMPI, "mpirun", false, "mpirun (/bin/mpirun) is Open MPI's, not Intel MPI's: put Intel MPI's first on PATH (activate the venv with the impi-rt wheel"},
		{"flavor intel, none on PATH", map[string]string{}, IntelMPI, "mpirun", "", IntelMPI, "mpirun", false, ""},
		{"flavor intel", intel, IntelMPI, "mpirun", "", IntelMPI, "mpirun", true, ""},
		{"flavor openmpi mpiexec", intel, OpenMPI, "mpiexec", "", OpenMPI, "mpiexec.openmpi", false, "mpiexec (/bin/mpiexec) is Intel MPI's, not Open MPI's: put Open MPI's bin directory first on PATH"},
		{"binary by name", debian, "", "mpirun", "/opt/x/mpirun.mpich", MPICH, "/opt/x/mpirun.mpich", false, ""},
		{"binary by version", intel, "", "mpirun", "mpirun", IntelMPI, "mpirun", true, ""},
		{"binary and flavor", intel, IntelMPI, "mpirun", "mpirun", IntelMPI, "mpirun", true, ""},
		{"binary of another flavor", debian, IntelMPI, "mpirun", "mpirun", IntelMPI, "mpirun", true, "mpirun (/bin/mpirun) is Open MPI's, not Intel MPI's"},
		{"binary by name, flavor given", debian, IntelMPI, "mpirun", "mpirun.openmpi", IntelMPI, "mpirun.openmpi", true, ""},
		{"binary unknown", map[string]string{"mpirun": "??"}, "", "mpirun", "mpirun", "", "mpirun", true, "cannot tell the MPI flavor of mpirun from its --version output: pass --flavor"},
		{"binary missing", map[string]string{}, "", "mpirun", "mympirun", "", "mympirun", false, "cannot tell the MPI flavor of mympirun"},
		// A launcher that never answers --version is the error, not skipped.
		{"autodetect: mpirun hangs", map[string]string{"mpirun": hangs, "mpiexec": versions["mpich"]}, "", "mpirun", "", "", "", false, "/bin/mpirun --version: no answer"},
		{"binary hangs", map[string]string{"slow": hangs}, "", "mpirun", "slow", "", "", false, "/bin/slow --version: no answer"},
		{"flavor given, generic mpirun hangs", map[string]string{"mpirun": hangs}, IntelMPI, "mpirun", "", "", "", false, "/bin/mpirun --version: no answer"},
		{"srun no flavor", debian, "", "srun", "", "", "srun", true, ""},
		{"srun flavor", debian, IntelMPI, "srun", "", IntelMPI, "srun", true, ""},
		{"srun binary", map[string]string{}, "", "srun", "/opt/slurm/bin/srun", "", "/opt/slurm/bin/srun", false, ""},
		{"srun missing", map[string]string{}, "", "srun", "", "", "srun", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := fakeProbe(tt.path)
			f, bin, found, err := FindLauncher(p, tt.flavor, tt.launcher, tt.binary)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := []any{f, bin, found}
			if diff := cmp.Diff([]any{tt.wantFlavor, tt.wantBin, tt.wantFound}, got); diff != "" {
				t.Errorf("FindLauncher (-want +got):\n%s", diff)
			}
		})
	}
}

// Names that say their flavor are not run.
func TestFindLauncherAsksOnlyGenericNames(t *testing.T) {
	p, asked := fakeProbe(map[string]string{"mpirun.openmpi": versions["openmpi5"], "mpirun": versions["mpich"]})
	if _, _, _, err := FindLauncher(p, "", "mpirun", ""); err != nil {
		t.Fatal(err)
	}
	if len(*asked) != 0 {
		t.Errorf("ran --version of %v", *asked)
	}
}

// A launcher that is nowhere says what was looked for and what to do, by
// flavor (issue 30, item 17: "mpirun: launcher not found on PATH").
func TestNotFound(t *testing.T) {
	for _, tt := range []struct {
		name     string
		binary   string
		flavor   Flavor
		launcher Program
		want     string
	}{
		{"intel mpi", "mpirun", IntelMPI, ProgramMpirun,
			"mpirun: Intel MPI's launcher not found on PATH (looked for mpirun, mpiexec.hydra): put Intel MPI's first on PATH (activate the venv with the impi-rt wheel, or use --profile intel-pip; oneAPI: source setvars.sh), or give its launcher with --mpirun PATH"},
		{"open mpi", "mpirun.openmpi", OpenMPI, ProgramMpirun,
			"mpirun.openmpi: Open MPI's launcher not found on PATH (looked for mpirun.openmpi, mpirun): put Open MPI's bin directory first on PATH, or give its launcher with --mpirun PATH"},
		{"a path", "/opt/mpi/bin/mpirun", MPICH, ProgramMpirun, "/opt/mpi/bin/mpirun: no such launcher: give the path of an installed one with --mpirun PATH"},
		{"srun", "srun", MPICH, ProgramSrun, "srun: not found on PATH: --launcher srun needs Slurm's srun (run where Slurm is installed, or pick --launcher mpirun)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := NotFound(tt.binary, tt.flavor, tt.launcher).Error(); got != tt.want {
				t.Errorf("NotFound =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
