package tomlpos

import (
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"
)

// The position scanner agrees with the document on everything the toml
// parser accepts that can hide a key: strings spanning lines, arrays with
// comments, inline tables, quoted and dotted keys, arrays of tables, CRLF.
func TestScanPositions(t *testing.T) {
	doc := strings.Join([]string{
		`# a comment with key = "value"`, // 1
		`description = """`,              // 2
		`fake = "not a key"`,             // 3
		`"""`,                            // 4
		`"quoted.key" = 'lit'`,           // 5
		`dotted.inner = 1`,               // 6
		``,                               // 7
		`[slurm] # trailing comment`,     // 8
		`  modules = [ # open`,           // 9
		`    "a", # one`,                 // 10
		`    "b",`,                       // 11
		`  ]`,                            // 12
		`time = '''`,                     // 13
		`x = 1'''`,                       // 14
		``,                               // 15
		`[[env.source]]`,                 // 16
		`script = "/a"`,                  // 17
		`[[env.source]]`,                 // 18
		`script = "/b"`,                  // 19
		`args = ["]", "\"#"]`,            // 20
		`[ env . vars ]`,                 // 21
		"A = { b = 1, c = [2, 3] }\r",    // 22
		`B = 1979-05-27 07:32:00`,        // 23
		`C = "after"`,                    // 24
	}, "\n")
	if _, err := toml.Decode(doc, new(map[string]any)); err != nil {
		t.Fatalf("test document does not parse: %v", err)
	}
	p := Scan(doc)
	keys := map[string]Pos{
		"description":          {2, 1},
		`"quoted.key"`:         {5, 1},
		"dotted":               {6, 1},
		"dotted.inner":         {6, 1},
		"slurm":                {8, 2},
		"slurm.modules":        {9, 3},
		"slurm.time":           {13, 1},
		"env.source":           {16, 3},
		"env.source[0]":        {16, 3},
		"env.source[0].script": {17, 1},
		"env.source[1]":        {18, 3},
		"env.source[1].script": {19, 1},
		"env.source[1].args":   {20, 1},
		"env.vars":             {21, 3},
		"env.vars.A":           {22, 1},
		"env.vars.A.b":         {22, 7},
		"env.vars.A.c":         {22, 14},
		"env.vars.B":           {23, 1},
		"env.vars.C":           {24, 1},
	}
	vals := map[string]Pos{
		"description":           {2, 15},
		"slurm.modules":         {9, 13},
		"slurm.modules[0]":      {10, 5},
		"slurm.modules[1]":      {11, 5},
		"slurm.time":            {13, 8},
		"env.source[1].args[1]": {20, 14},
		"env.vars.A.c[1]":       {22, 22},
		"env.vars.C":            {24, 5},
	}
	for k, want := range keys {
		if got, ok := p.Key[k]; !ok || got != want {
			t.Errorf("key %s at %v (%v), want %v", k, got, ok, want)
		}
	}
	for k, want := range vals {
		if got, ok := p.Val[k]; !ok || got != want {
			t.Errorf("value %s at %v (%v), want %v", k, got, ok, want)
		}
	}
	for _, k := range []string{"fake", "x", "slurm.x", "description.fake"} {
		if _, ok := p.Key[k]; ok {
			t.Errorf("%s recorded as a key: it is inside a string", k)
		}
	}
}

func TestParentPath(t *testing.T) {
	tests := map[string]string{
		"a":                  "",
		"a.b":                "a",
		"env.source[1]":      "env.source",
		"env.source[1].args": "env.source[1]",
		`env.vars."a.b"`:     "env.vars",
		`env.vars."a\".b".c`: `env.vars."a\".b"`,
	}
	for in, want := range tests {
		if got := ParentPath(in); got != want {
			t.Errorf("ParentPath(%s) = %s, want %s", in, got, want)
		}
	}
	if diff := cmp.Diff(`a."b.c".d-e."x y"`, JoinPath("a", "b.c", "d-e", "x y")); diff != "" {
		t.Error(diff)
	}
}
