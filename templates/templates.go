// Package templates renders the scripts batchkit generates. The defaults are
// embedded; a site overrides any of them by putting a file of the same name
// in a directory named by its profile. Every template runs with
// missingkey=error, and every value that reaches a shell goes through one
// quoting function, q, so that no job name, argument or variable can
// execute: text/template does no escaping of its own.
package templates

import (
	"bytes"
	"cmp"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"unicode"

	"github.com/batchkit/batchkit/internal/infile"
	"github.com/batchkit/batchkit/internal/outfile"
	"github.com/batchkit/batchkit/internal/shquote"
)

//go:embed *.tmpl
var defaults embed.FS

// Names of the templates batchkit renders.
const (
	Sbatch = "sbatch.sh.tmpl"
)

// maxTemplateBytes bounds a site template file.
const maxTemplateBytes = 1 << 20

// Names lists them.
var Names = []string{Sbatch}

// DirectiveValue quotes a value for an #SBATCH line. sbatch reads these
// lines with its own tokenizer, not the shell's: quotes group (a backslash
// escapes a quote or backslash inside them), whitespace ends an unquoted
// value even after a backslash, an unquoted # starts a comment, and a line
// break ends the directive. A double-quoted value with \ and \" escaped
// therefore arrives byte for byte (verified against sbatch 22.05); a line
// break cannot be carried at all. An empty value is refused: a flag
// without one (--exclusive, --requeue) is printed alone, and a template
// that prints --flag={{directive .Value}} for it would give sbatch
// --exclusive="" instead.
func DirectiveValue(s string) (string, error) {
	if s == "" {
		return "", errors.New(`an empty #SBATCH value ("" is not the flag alone): print --flag without = when it has no value, as {{if .Value}}={{directive .Value}}{{end}}`)
	}
	if strings.ContainsAny(s, "\n\r\x00") {
		return "", fmt.Errorf("value %q contains a line break or NUL, which an #SBATCH line cannot carry", s)
	}
	if strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,:/=+@%") == "" {
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

var wordRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// Word passes s when it is a plain word that no shell or sbatch reads as
// anything but itself: letters, digits, _ . and - (not first). It is for
// what cannot be quoted where it goes, such as a variable's name in
// ${NAME+1} or an #SBATCH flag's name.
func Word(s string) (string, error) {
	if !wordRE.MatchString(s) {
		return "", fmt.Errorf("%q is not a plain word (letters, digits, _ . -), which is all a name may be here", s)
	}
	return s, nil
}

var funcs = template.FuncMap{
	"q":         shquote.Quote, // POSIX single quotes: the same in sh, bash and zsh
	"qargs":     shquote.Join,
	"directive": DirectiveValue,
	"comment":   Comment,
	"word":      Word,
}

// printers are the functions a template's output may come from: each one
// quotes or checks its value for where it goes. An action that prints
// anything else is refused when the template is loaded (see checkPrints).
var printers = []string{"q", "qargs", "directive", "comment", "word"}

// Set is a loaded set of templates. dir and files say where each came
// from, for messages: the site's directory and the files read from it.
type Set struct {
	t     *template.Template
	dir   string
	files []string
}

// Load parses the embedded templates, then, when dir is not empty, every
// *.tmpl file in dir, which replaces the embedded template of the same name
// or is included by another ({{template "name.tmpl" .}}). A file that
// does neither is an error (a misspelt name would otherwise leave the
// embedded template in use without a word), and so is a template that
// prints a value through none of the quoting functions (checkPrints) or
// includes one that does not exist or itself (checkIncludes).
func Load(dir string) (*Set, error) {
	root := template.New("batchkit").Option("missingkey=error").Funcs(funcs)
	if _, err := root.ParseFS(defaults, "*.tmpl"); err != nil {
		return nil, fmt.Errorf("embedded templates: %w", err)
	}
	if err := checkAll(root); err != nil {
		return nil, fmt.Errorf("embedded template: %w", err)
	}
	if dir == "" {
		return &Set{t: root}, nil
	}
	files, extra, err := parseDir(root, dir)
	if err != nil {
		return nil, err
	}
	// Every template, the files' {{define}}s too; errors name the file.
	if err := checkAll(root); err != nil {
		return nil, fmt.Errorf("template directory %s: %w", dir, err)
	}
	used := map[string]bool{}
	for _, t := range root.Templates() {
		for _, c := range includes(t) {
			used[c.Name] = true
		}
	}
	for _, name := range extra {
		if !used[name] {
			return nil, fmt.Errorf("template %s: batchkit renders only %s, and no template includes this one ({{template %q .}}): a misspelt name?",
				filepath.Join(dir, name), strings.Join(Names, ", "), name)
		}
	}
	return &Set{t: root, dir: dir, files: files}, nil
}

// parseDir parses dir's *.tmpl files into root. It returns the files read
// and those of them that replace no template batchkit renders (extra).
// dir must be a directory: a FIFO would block the listing for ever.
func parseDir(root *template.Template, dir string) (files, extra []string, err error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("reading template directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, nil, &NotDirError{Path: dir, Kind: cmp.Or(outfile.KindOf(fi.Mode()), "a regular file")}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("reading template directory %s: %w", dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		if filepath.Ext(name) != ".tmpl" {
			if slices.Contains(Names, name+".tmpl") {
				return nil, nil, fmt.Errorf("template %s: batchkit reads only *.tmpl files: did you mean %s.tmpl?", filepath.Join(dir, name), name)
			}
			continue
		}
		path := filepath.Join(dir, name)
		b, err := infile.Read(path, maxTemplateBytes)
		if err != nil {
			return nil, nil, fmt.Errorf("reading template %s: %w", path, err)
		}
		before := len(root.Templates())
		if _, err := root.New(name).Parse(string(b)); err != nil {
			return nil, nil, fmt.Errorf("parsing template %s: %w", path, err)
		}
		files = append(files, name)
		// A file of {{define}}s is a library for the others.
		if !slices.Contains(Names, name) && len(root.Templates()) <= before+1 {
			extra = append(extra, name)
		}
	}
	return files, extra, nil
}

// NotDirError is a template directory that is something else.
type NotDirError struct {
	Path string
	Kind string // "a regular file", "a FIFO" ...
}

func (e *NotDirError) Error() string {
	return fmt.Sprintf("template directory %s: is %s, not a directory", e.Path, e.Kind)
}

// checkAll runs the load-time checks on every template of root, in the
// order of their names so that the first error is always the same one.
func checkAll(root *template.Template) error {
	ts := root.Templates()
	slices.SortFunc(ts, func(a, b *template.Template) int { return strings.Compare(a.Name(), b.Name()) })
	for _, t := range ts {
		if err := checkPrints(t); err != nil {
			return err
		}
	}
	return checkIncludes(root, ts)
}

// checkPrints refuses an action of t that prints a value no printer has
// seen: text/template escapes nothing, so {{.JobName}} in a script would
// run whatever the job name says. Assignments print nothing, and a
// constant is the template author's own text. comment and directive make
// a value safe only inside a line that starts with #, so they are refused
// elsewhere. The walk follows the template's text in order, both branches
// of an if one after the other: good enough to know how a line starts.
func checkPrints(t *template.Template) error {
	if t.Tree == nil {
		return nil
	}
	var (
		bad  parse.Node
		why  string
		line string // the current line's text so far
	)
	visit(t.Tree.Root, func(n parse.Node) bool {
		switch n := n.(type) {
		case *parse.TextNode:
			text := string(n.Text)
			if i := strings.LastIndexByte(text, '\n'); i >= 0 {
				line = text[i+1:]
			} else {
				line += text
			}
		case *parse.ActionNode:
			printer, ok := printsThrough(n.Pipe)
			switch {
			case !ok:
				bad, why = n, fmt.Sprintf("prints a value unquoted: end the action with one of %s (say {{q .X}} or {{.X | q}})", strings.Join(printers, ", "))
			case (printer == "comment" || printer == "directive") && !strings.HasPrefix(strings.TrimLeft(line, " \t"), "#"):
				bad, why = n, printer+" makes a value safe only in a line that starts with # (a comment or #SBATCH line): use q here"
			case printer != "":
				line += "x"
			}
		case *parse.TemplateNode:
			line += "x"
		}
		return bad == nil
	})
	if bad == nil {
		return nil
	}
	return nodeError(t.Tree, bad, why)
}

// printsThrough reports the printer a pipeline's output comes from: ""
// with ok when it prints nothing (an assignment) or a constant, and not
// ok when it prints through anything else.
func printsThrough(p *parse.PipeNode) (printer string, ok bool) {
	if p == nil || len(p.Decl) > 0 || len(p.Cmds) == 0 {
		return "", true
	}
	last := p.Cmds[len(p.Cmds)-1]
	if len(last.Args) == 0 {
		return "", true
	}
	switch a := last.Args[0].(type) {
	case *parse.IdentifierNode:
		if slices.Contains(printers, a.Ident) {
			return a.Ident, true
		}
	case *parse.StringNode, *parse.NumberNode, *parse.BoolNode:
		return "", len(p.Cmds) == 1 && len(last.Args) == 1
	}
	return "", false
}

// visit calls f on n and the nodes under it in the template's text order,
// both branches of an if, range or with one after the other, until f
// returns false. It reports whether f never did.
func visit(n parse.Node, f func(parse.Node) bool) bool {
	if l, ok := n.(*parse.ListNode); ok && l == nil {
		return true
	}
	if !f(n) {
		return false
	}
	var lists []*parse.ListNode
	switch n := n.(type) {
	case *parse.ListNode:
		for _, c := range n.Nodes {
			if !visit(c, f) {
				return false
			}
		}
	case *parse.IfNode:
		lists = []*parse.ListNode{n.List, n.ElseList}
	case *parse.RangeNode:
		lists = []*parse.ListNode{n.List, n.ElseList}
	case *parse.WithNode:
		lists = []*parse.ListNode{n.List, n.ElseList}
	}
	for _, l := range lists {
		if !visit(l, f) {
			return false
		}
	}
	return true
}

// Render executes the named template with data. Its error is a
// *RenderError.
func (s *Set) Render(name string, data any) (string, error) {
	t := s.t.Lookup(name)
	if t == nil {
		return "", fmt.Errorf("no template %q", name)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		var ee template.ExecError
		if errors.As(err, &ee) {
			err = ee.Err
		}
		return "", &RenderError{Template: name, Where: s.where(err), Err: err}
	}
	return buf.String(), nil
}

// where says whose template an execution error is in: text/template's
// location is only FILE:LINE:COL, without the site's directory.
func (s *Set) where(err error) string {
	msg := strings.TrimPrefix(err.Error(), "template: ")
	for _, f := range s.files {
		if strings.HasPrefix(msg, f+":") {
			return "template directory " + s.dir
		}
	}
	return "embedded template"
}

// RenderError is a template that failed to render. Err is
// text/template's, which starts with the file, line and column.
type RenderError struct {
	Template string // the template batchkit rendered
	Where    string // "template directory DIR" or "embedded template"
	Err      error
}

func (e *RenderError) Error() string {
	return fmt.Sprintf("rendering %s: %s: %s", e.Template, e.Where, strings.TrimPrefix(e.Err.Error(), "template: "))
}

func (e *RenderError) Unwrap() error { return e.Err }

// Sample is data to render a template with, and what it is, for a message.
type Sample struct {
	What string // "a sample script with every field set"
	Data any
}

// Check renders every template batchkit renders (Names) with each of its
// samples: what Load cannot see from the text, a field the data lacks or
// a value a function refuses, then fails with the file and line at
// `batchkit profile check` rather than at submission.
func (s *Set) Check(samples map[string][]Sample) error {
	for _, name := range Names {
		if len(samples[name]) == 0 {
			return fmt.Errorf("no sample to render %s with", name)
		}
		for _, sm := range samples[name] {
			if _, err := s.Render(name, sm.Data); err != nil {
				return fmt.Errorf("%w (with %s)", err, sm.What)
			}
		}
	}
	return nil
}

// Defaults exposes the embedded templates, e.g. for a site admin to copy.
func Defaults() fs.FS { return defaults }
