package sbatch

import (
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/batchkit/batchkit/internal/printable"
	"github.com/batchkit/batchkit/launch"
)

// After sbatch --wait ends with a job that failed, its exit code alone
// says little: the line a user gets names the job's state (FAILED,
// TIMEOUT, CANCELLED, OUT_OF_MEMORY, NODE_FAIL ...), why, where it ran,
// and the file its output is in, as scontrol keeps them for a while after
// the end (MinJobAge, 300 s by default).

// failedStates are the states a job ends in without having run to
// completion (squeue(1), JOB STATE CODES).
var failedStates = []string{"BOOT_FAIL", "CANCELLED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT"}

// JobState is what `scontrol show job -o` says of a job that ended.
type JobState struct {
	State, Reason, ExitCode, Nodes string
	StdOut, StdErr                 string // the paths, patterns expanded
}

// fieldStart is where a field of scontrol's one-line form begins: a word
// "Key=". A value may hold spaces (a path), so a word without such a key
// continues the value before it.
var fieldStart = regexp.MustCompile(`(?:^|\s)([A-Za-z][A-Za-z0-9/:_]*)=`)

// ParseJobState reads `scontrol show job -o ID`'s line.
func ParseJobState(line string) JobState {
	fields := map[string]string{}
	line = strings.TrimSpace(line)
	idx := fieldStart.FindAllStringSubmatchIndex(line, -1)
	for i, m := range idx {
		end := len(line)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		fields[line[m[2]:m[3]]] = strings.TrimSpace(line[m[1]:end])
	}
	return JobState{State: fields["JobState"], Reason: fields["Reason"], ExitCode: fields["ExitCode"],
		Nodes: fields["NodeList"], StdOut: fields["StdOut"], StdErr: fields["StdErr"]}
}

// FailedLine is the line for job id that ended with code under sbatch
// --wait: its state and the files of its output, as scontrol said them
// (st), or, when scontrol could not say (err), the code and where to look.
func FailedLine(id string, code int, st JobState, err error) string {
	if err != nil || st.State == "" {
		why := "no state"
		if err != nil {
			why = err.Error()
		}
		return printable.Line(fmt.Sprintf("job %s ended with exit code %d (scontrol show job %s: %s): its output is in the file --output names (slurm-%s.out by default), its state in sacct -j %s",
			id, code, id, why, id, id), 1024)
	}
	var why []string
	if st.Reason != "" && st.Reason != "None" {
		why = append(why, st.Reason)
	}
	if st.ExitCode != "" {
		why = append(why, "exit code "+st.ExitCode)
	}
	if st.Nodes != "" && st.Nodes != "(null)" {
		why = append(why, "on "+st.Nodes)
	}
	line := "job " + id + " " + st.State
	if len(why) > 0 {
		line += " (" + strings.Join(why, ", ") + ")"
	}
	switch {
	case st.Nodes == "" || st.Nodes == "(null)":
		line += ": it never started"
	case st.StdOut == "":
	case st.StdErr != "" && st.StdErr != st.StdOut:
		line += ": its output is in " + st.StdOut + ", its errors in " + st.StdErr
	default:
		line += ": its output is in " + st.StdOut
	}
	return printable.Line(line, 1024)
}

// stateTimeout bounds scontrol's answer: the job has ended, and a
// controller that does not answer must not hold the exit up.
const stateTimeout = 10 * time.Second

// jobState asks scontrol about job id.
func jobState(id string) (JobState, error) {
	out, err := launch.Ask(stateTimeout, "scontrol", "show", "job", "-o", id)
	if errors.Is(err, exec.ErrNotFound) {
		return JobState{}, errors.New("scontrol is not on PATH")
	}
	if err != nil {
		if msg := strings.TrimSpace(out); msg != "" {
			return JobState{}, fmt.Errorf("%v: %s", err, firstLine(msg))
		}
		return JobState{}, err
	}
	return ParseJobState(firstLine(out)), nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
