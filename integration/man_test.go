package integration

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The man page's SEE ALSO names only pages that exist: each one man -w
// finds on this machine, where make test installed Slurm and the MPIs
// (issue 30 item 19: it named torchrun(1), which no package installs).
func TestManSeeAlso(t *testing.T) {
	mostlyWaits(t)
	needTool(t, "man")
	page := run(t, 10*time.Second, bin, "man")
	_, see, ok := strings.Cut(page, "\n.SH SEE ALSO\n")
	if !ok {
		t.Fatalf("the man page has no SEE ALSO section:\n%s", page)
	}
	refs := regexp.MustCompile(`\\fB([A-Za-z0-9._-]+)\\fP\((\d)\)`).FindAllStringSubmatch(see, -1)
	if len(refs) == 0 {
		t.Fatalf("SEE ALSO names no page: %q", see)
	}
	for _, r := range refs {
		if out, err := exec.Command("man", "-w", r[2], r[1]).CombinedOutput(); err != nil {
			t.Errorf("SEE ALSO names %s(%s), which man -w does not find: %v %s", r[1], r[2], err, out)
		}
	}
}
