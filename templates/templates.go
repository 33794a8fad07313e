// Package templates renders the scripts batchkit generates. The defaults are
// embedded; a site overrides any of them by putting a file of the same name
// in a directory named by its profile. Every template runs with
// missingkey=error, and every value that reaches a shell goes through one
// quoting function, q, so that no job name, argument or variable can
// execute: text/template does no escaping of its own.
package templates

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"unicode"

	"mvdan.cc/sh/v3/syntax"
)

//go:embed *.tmpl
var defaults embed.FS

// Names of the templates batchkit renders.
const (
	Sbatch = "sbatch.sh.tmpl"
)

// Quote quotes s as one bash word. A NUL byte cannot be passed to a program
// at all, so it is an error rather than a silent truncation.
func Quote(s string) (string, error) {
	if strings.ContainsRune(s, 0) {
		return "", fmt.Errorf("value %q contains a NUL byte, which no program can receive", s)
	}
	q, err := syntax.Quote(s, syntax.LangBash)
	if err != nil {
		return "", fmt.Errorf("cannot quote %q for bash: %w", s, err)
	}
	return q, nil
}

// QuoteArgs quotes each argument and joins them with spaces.
func QuoteArgs(args []string) (string, error) {
	out := make([]string, len(args))
	for i, a := range args {
		q, err := Quote(a)
		if err != nil {
			return "", err
		}
		out[i] = q
	}
	return strings.Join(out, " "), nil
}

// DirectiveValue quotes a value for an #SBATCH line. sbatch reads these
// lines with its own tokenizer, not the shell's: quotes group (a backslash
// escapes a quote or backslash inside them), whitespace ends an unquoted
// value even after a backslash, an unquoted # starts a comment, and a line
// break ends the directive. A double-quoted value with \ and \" escaped
// therefore arrives byte for byte (verified against sbatch 22.05); a line
// break cannot be carried at all.
func DirectiveValue(s string) (string, error) {
	if strings.ContainsAny(s, "\n\r\x00") {
		return "", fmt.Errorf("value %q contains a line break or NUL, which an #SBATCH line cannot carry", s)
	}
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,:/=+@%") == "" {
		return s, nil // plainly safe: keep scripts readable
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`, nil
}

// Comment makes s safe to print inside a shell comment line: control
// characters (a line break would end the comment and start a command) are
// written as Go escapes, "\n".
func Comment(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

var funcs = template.FuncMap{
	"q":         Quote,
	"qargs":     QuoteArgs,
	"directive": DirectiveValue,
	"comment":   Comment,
}

// Set is a loaded set of templates.
type Set struct{ t *template.Template }

// Load parses the embedded templates, then, when dir is not empty, every
// *.tmpl file in dir, which replaces the embedded template of the same name.
func Load(dir string) (*Set, error) {
	root := template.New("batchkit").Option("missingkey=error").Funcs(funcs)
	if _, err := root.ParseFS(defaults, "*.tmpl"); err != nil {
		return nil, fmt.Errorf("embedded templates: %w", err)
	}
	if dir == "" {
		return &Set{root}, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading template directory %s: %w", dir, err)
	}
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".tmpl" {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading template %s: %w", path, err)
		}
		if _, err := root.New(e.Name()).Parse(string(b)); err != nil {
			return nil, fmt.Errorf("parsing template %s: %w", path, err)
		}
	}
	return &Set{root}, nil
}

// Render executes the named template with data.
func (s *Set) Render(name string, data any) (string, error) {
	t := s.t.Lookup(name)
	if t == nil {
		return "", fmt.Errorf("no template %q", name)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		var ee template.ExecError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("rendering %s: %w", name, ee.Err)
		}
		return "", fmt.Errorf("rendering %s: %w", name, err)
	}
	return buf.String(), nil
}

// Defaults exposes the embedded templates, e.g. for a site admin to copy.
func Defaults() fs.FS { return defaults }
