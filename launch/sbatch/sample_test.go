package sbatch

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/templates"
)

// Every field of Sample is set, every list has an element and every
// element's fields are set too, so that a template's field that exists is
// never skipped by profile check: a new field of slurm.Script fails here
// until Sample sets it.
func TestSampleSetsEveryField(t *testing.T) {
	for _, path := range zeroFields(reflect.ValueOf(Sample()), "Sample()") {
		t.Errorf("%s is zero: set it in Sample", path)
	}
}

// zeroFields lists the paths of v's zero values, its own, its fields', its
// elements' and what its pointers point to.
func zeroFields(v reflect.Value, path string) []string {
	if v.IsZero() {
		return []string{path}
	}
	var zero []string
	switch v.Kind() {
	case reflect.Pointer:
		zero = zeroFields(v.Elem(), "(*"+path+")")
	case reflect.Struct:
		for i := range v.NumField() {
			zero = append(zero, zeroFields(v.Field(i), path+"."+v.Type().Field(i).Name)...)
		}
	case reflect.Slice:
		if v.Len() == 0 {
			return []string{path + " (empty)"}
		}
		for i := range v.Len() {
			zero = append(zero, zeroFields(v.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	return zero
}

// The embedded templates render both samples: profile check never fails a
// profile that keeps them.
func TestEmbeddedTemplatesRenderTheSamples(t *testing.T) {
	s, err := templates.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(Samples()); err != nil {
		t.Fatal(err)
	}
	out, err := s.Render(templates.Sbatch, FlagAloneSample())
	if err != nil || !strings.Contains(out, "\n#SBATCH --time=30\n#SBATCH --exclusive\n") {
		t.Errorf("rendered %v:\n%s\nwant the line #SBATCH --exclusive", err, out)
	}
}

// A site template that prints --flag={{directive .Value}} for every
// directive fails profile check (issue 30 item 19: the site-admin guide's
// rendered #SBATCH --exclusive="", which sbatch reads as an empty value).
func TestCheckRefusesFlagEqualsEmpty(t *testing.T) {
	dir := t.TempDir()
	tmpl := "#!/bin/bash\n{{range .Directives}}#SBATCH --{{word .Flag}}={{directive .Value}}\n{{end}}exec {{qargs .Launch}}\n"
	if err := os.WriteFile(filepath.Join(dir, templates.Sbatch), []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := templates.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Check(Samples())
	if err == nil || !strings.Contains(err.Error(), "--exclusive") || !strings.Contains(err.Error(), "{{if .Value}}") {
		t.Errorf("Check = %v; want the empty value of the sample's --exclusive refused, saying how to print it", err)
	}
}

func TestZeroFields(t *testing.T) {
	type inner struct{ A, B string }
	type outer struct {
		S    string
		L    []inner
		P    *inner
		Flag bool
	}
	for _, tt := range []struct {
		name string
		v    any
		want []string
	}{
		{"all set", outer{"s", []inner{{"a", "b"}}, &inner{"a", "b"}, true}, nil},
		{"nothing set", outer{}, []string{"v"}},
		{"a field", outer{S: "s", L: []inner{{"a", "b"}}, P: &inner{"a", "b"}}, []string{"v.Flag"}},
		{"an empty list", outer{"s", []inner{}, &inner{"a", "b"}, true}, []string{"v.L (empty)"}},
		{"an element's field", outer{"s", []inner{{"a", "b"}, {A: "a"}}, &inner{"a", "b"}, true}, []string{"v.L[1].B"}},
		{"through a pointer", outer{"s", []inner{{"a", "b"}}, &inner{B: "b"}, true}, []string{"(*v.P).A"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, zeroFields(reflect.ValueOf(tt.v), "v")); diff != "" {
				t.Errorf("zeroFields (-want +got):\n%s", diff)
			}
		})
	}
}
