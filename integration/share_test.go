package integration

import (
	"flag"
	"strconv"
	"testing"
)

// How the tests share this machine (two cores in CI) and the two-node
// cluster. go test runs the tests that call t.Parallel side by side, once
// those that do not have run one by one. Many of these tests mostly wait:
// for a job to be scheduled and to end, for ranks that sleep. One at a time
// they took 14 minutes in CI, the cores idle for much of it. A test says
// which kind it is in its first line:
//
//   - mostlyWaits(t): it waits on Slurm jobs, sleeps or other processes
//     more than it computes, and asserts no duration. It runs alongside
//     every other parallel test.
//   - cpu.enter(t): it keeps the cores busy (trainings, PyTorch jobs,
//     builds, hundreds of shells) and its ranks block while they wait. It
//     runs alongside the tests that wait, two busy tests at a time.
//   - neither: it runs alone, before all of those, as every test once did.
//     So does a test that asserts how long something took (fail fast
//     within 10 s, a job that ends within 40 s of its submission, queue
//     included): busy neighbours, or a queue full of their jobs, would fail
//     it. So does a world whose ranks poll the CPU while they wait (the
//     MPI and oneCCL backends): beside other work it took 5 to 10 times as
//     long. And so does a test that races a signal against a job's few
//     seconds of training (TestSbatchStop), or listens on a fixed port
//     that another test may take (torchrun's default, 29500, which plain
//     Hydra's ranks get).
//
// Subtests run one after another inside their parent, whatever it is; a
// group of them may run side by side through a gate of their own (enter
// calls t.Parallel). A test enters at most one gate, and none of its
// subtests enters that one again: it would wait for itself.

// A gate lets as many tests through at a time as it has room for.
type gate chan struct{}

// cpu is the gate of the tests that keep the cores busy: one per core.
var cpu = make(gate, 2)

// enter marks t parallel and waits for room in g, held until t and its
// subtests are done.
func (g gate) enter(t *testing.T) {
	t.Helper()
	t.Parallel()
	g <- struct{}{}
	t.Cleanup(func() { <-g })
}

// mostlyWaits marks t as a test that may run alongside any other parallel
// test (see above).
func mostlyWaits(t *testing.T) {
	t.Helper()
	t.Parallel()
}

// parallelTests is how many parallel tests go test runs at once unless
// -test.parallel says otherwise: every test that waits, at once (its
// default, GOMAXPROCS, would be two). The groups of subtests that ran two
// at a time under that default keep to it through gates of two.
const parallelTests = 64

// raiseParallel sets -test.parallel to parallelTests unless the command
// line set it. Call it after flag.Parse.
func raiseParallel() error {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if set {
		return nil
	}
	return flag.Set("test.parallel", strconv.Itoa(parallelTests))
}
