// Package report is what batchkit profile prints: the rows of 'profile
// list', 'profile explain' and 'profile check', as text for people and as
// the JSON objects scripts read (their keys are an interface), and the
// check's summary.
package report

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/BurntSushi/toml"

	"github.com/batchkit/batchkit/profile"
	"github.com/batchkit/batchkit/templates"
)

// ListRow is one profile of 'profile list'.
type ListRow struct {
	Name        string   `json:"name"`
	Source      string   `json:"source"` // a path, or embedded:NAME.toml
	Shadowed    bool     `json:"shadowed"`
	Description string   `json:"description"`
	Problems    []string `json:"problems"` // an invalid profile's, one a line of profile check
}

// List is the rows of the profiles the loader lists.
func List(entries []profile.Entry) []ListRow {
	rows := make([]ListRow, len(entries))
	for i, e := range entries {
		rows[i] = ListRow{Name: e.Name, Source: e.Path, Shadowed: e.Shadowed, Description: e.Description, Problems: []string{}}
		for _, p := range profile.Problems(e.Err) {
			rows[i].Problems = append(rows[i].Problems, p.Error())
		}
	}
	return rows
}

// WriteList writes rows as a table: an invalid profile's description says
// how many problems it has and how to see them.
func WriteList(w io.Writer, rows []ListRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSOURCE\tDESCRIPTION")
	for _, r := range rows {
		src := r.Source
		if r.Shadowed {
			src += " (shadowed)"
		}
		desc := r.Description
		if n := len(r.Problems); n > 0 {
			desc = fmt.Sprintf("(invalid: %d %s; batchkit profile check %s)", n, plural(n, "problem"), r.Source)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, src, desc)
	}
	return tw.Flush()
}

// WriteExplain writes every value of r with where it comes from.
func WriteExplain(w io.Writer, r *profile.Resolved) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tFROM\tVALUE")
	for _, s := range r.Settings() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Key, s.Origin, s.Value)
	}
	return tw.Flush()
}

// ExplainRow is one value of 'profile explain --format json'.
type ExplainRow struct {
	Key   string `json:"key"`
	From  string `json:"from"`
	Value any    `json:"value"` // a string, number, boolean or list
}

// Explain is every value of r as a row.
func Explain(r *profile.Resolved) ([]ExplainRow, error) {
	rows := []ExplainRow{}
	for _, s := range r.Settings() {
		v, err := tomlValue(s.Value)
		if err != nil {
			return nil, fmt.Errorf("profile explain: %s: %w", s.Key, err)
		}
		rows = append(rows, ExplainRow{Key: s.Key, From: s.Origin.String(), Value: v})
	}
	return rows, nil
}

// tomlValue decodes a Setting's value, which is TOML, to what JSON writes.
func tomlValue(text string) (any, error) {
	var doc struct{ V any }
	if _, err := toml.Decode("V = "+text, &doc); err != nil {
		return nil, err
	}
	return doc.V, nil
}

// WriteShow writes r as a profile of its own, every value set, after
// comments naming it and the profiles it extends.
func WriteShow(w io.Writer, r *profile.Resolved) error {
	fmt.Fprintf(w, "# profile %s from %s\n", templates.Comment(r.Name), templates.Comment(r.Path))
	for _, f := range r.Chain[1:] {
		fmt.Fprintf(w, "# extends %s from %s\n", templates.Comment(f.Name), templates.Comment(f.Path))
	}
	fmt.Fprintln(w)
	return r.WriteTOML(w)
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
