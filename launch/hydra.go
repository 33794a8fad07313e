package launch

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// signalLauncher sends s to the launcher p, or to the mpiexec.hydra it
// runs: Intel MPI's mpirun (oneAPI's and the impi-rt wheel's) is a shell
// script that runs mpiexec.hydra as its child and traps nothing, so a
// signal would kill the script, orphaning Hydra (and its ranks) and losing
// its exit status, while mpiexec.hydra passes SIGUSR1 on to the ranks and
// stops them on SIGTERM. The sbatch template's batchkit_hydra_of does the
// same in the batch script.
func signalLauncher(p *os.Process, s os.Signal) {
	if pid := hydraChild(p.Pid); pid > 0 {
		if sig, ok := s.(syscall.Signal); ok && syscall.Kill(pid, sig) == nil {
			return
		}
	}
	_ = p.Signal(s)
}

// hydraChild is the pid of a child of pid named mpiexec.hydra, or 0.
func hydraChild(pid int) int {
	p := strconv.Itoa(pid)
	b, err := os.ReadFile("/proc/" + p + "/task/" + p + "/children")
	if err != nil {
		return 0
	}
	for _, kid := range strings.Fields(string(b)) {
		comm, err := os.ReadFile("/proc/" + kid + "/comm")
		if err == nil && strings.TrimSpace(string(comm)) == "mpiexec.hydra" {
			n, _ := strconv.Atoi(kid)
			return n
		}
	}
	return 0
}
