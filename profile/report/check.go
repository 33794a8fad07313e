package report

import (
	"fmt"
	"io"

	"github.com/batchkit/batchkit/profile"
)

// CheckRow is one argument of 'profile check'.
type CheckRow struct {
	File     string   `json:"file"`
	OK       bool     `json:"ok"`
	Note     string   `json:"note"` // why something was not checked
	Problems []string `json:"problems"`
	fresh    []error  // the problems not said for an argument before (profile.Said)
}

// CheckTemplates checks a resolved profile's templates; note says what it
// could not check. launch/sbatch's CheckTemplates renders them as sbatch
// would.
type CheckTemplates func(*profile.Resolved) (note string, err error)

// Check resolves each argument (a file or a profile name) and checks its
// templates; a base's problems are fresh once, not once per profile
// extending it.
func Check(loader *profile.Loader, args []string, templates CheckTemplates) []CheckRow {
	said := profile.Said{}
	rows := make([]CheckRow, len(args))
	for i, arg := range args {
		rows[i] = CheckRow{File: arg, OK: true, Problems: []string{}}
		r, err := loader.Resolve(arg)
		if err == nil {
			var note string
			note, err = templates(r)
			rows[i].Note = note
		}
		if err == nil {
			continue
		}
		rows[i].OK = false
		for _, p := range profile.Problems(err) {
			rows[i].Problems = append(rows[i].Problems, p.Error())
		}
		rows[i].fresh = said.Fresh(err)
	}
	return rows
}

// WriteCheck prints "FILE: ok" on stdout, each fresh problem on stderr.
func WriteCheck(stdout, stderr io.Writer, rows []CheckRow) {
	for _, r := range rows {
		switch {
		case r.OK && r.Note != "":
			fmt.Fprintf(stdout, "%s: ok (%s)\n", r.File, r.Note)
		case r.OK:
			fmt.Fprintf(stdout, "%s: ok\n", r.File)
		case len(r.fresh) == 0:
			fmt.Fprintf(stderr, "%s: not ok: its problems are above\n", r.File)
		}
		for _, e := range r.fresh {
			fmt.Fprintln(stderr, e)
		}
	}
}

// CheckSummary counts the distinct problems when any profile has one: the
// one line of the check's failure; nil when every profile is good.
func CheckSummary(rows []CheckRow) error {
	var nBad, nProblems int
	for _, r := range rows {
		if !r.OK {
			nBad++
		}
		nProblems += len(r.fresh)
	}
	if nBad == 0 {
		return nil
	}
	return fmt.Errorf("%d %s in %d of %d %s", nProblems, plural(nProblems, "problem"),
		nBad, len(rows), plural(len(rows), "profile"))
}
