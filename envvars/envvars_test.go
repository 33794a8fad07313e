package envvars

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var ownName = regexp.MustCompile(`^BATCHKIT_[A-Z0-9_]+$`)

// TestReadIsComplete reads every Go file of batchkit's code (not its
// tests) for a string that is a BATCHKIT_* name: each must be in Read,
// the list the man page's ENVIRONMENT is written from, or in Exported. A
// variable the code reads is named through a constant here or spelt where
// it is read; either way it is found. (issue 30 item 19: the man page
// listed 3 of 11.)
func TestReadIsComplete(t *testing.T) {
	listed := map[string]bool{}
	for _, v := range Read {
		if listed[v.Name] || v.Means == "" {
			t.Errorf("Read: %s listed twice or without a meaning", v.Name)
		}
		listed[v.Name] = true
	}
	for _, name := range Exported {
		listed[name] = true
	}
	found := map[string]string{} // name -> where
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "integration", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && ownName.MatchString(s) {
					found[s] = fset.Position(lit.Pos()).String()
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, where := range found {
		if !listed[name] {
			t.Errorf("%s: %s is neither in envvars.Read (with what it means, for the man page) nor in envvars.Exported", where, name)
		}
	}
	for name := range listed {
		if _, ok := found[name]; !ok {
			t.Errorf("%s is listed but spelt nowhere in the code", name)
		}
	}
	if len(found) < 10 || !slices.ContainsFunc(Read, func(v Var) bool { return v.Name == Pin }) {
		t.Errorf("found only %d names: is the walk reading the module?", len(found))
	}
}
