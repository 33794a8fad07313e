package templates

import (
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"
)

// includes lists t's {{template "name" .}} actions in text order.
func includes(t *template.Template) []*parse.TemplateNode {
	if t.Tree == nil {
		return nil
	}
	var found []*parse.TemplateNode
	visit(t.Tree.Root, func(n parse.Node) bool {
		if c, ok := n.(*parse.TemplateNode); ok {
			found = append(found, c)
		}
		return true
	})
	return found
}

// checkIncludes refuses an include of a template that is not defined, and
// an include cycle. Both are found from the parse trees, when the
// directory is loaded: at run time the first fails only when its branch is
// taken, and the second recurses 100,000 levels deep before text/template
// gives up. A cycle is refused even when a condition would end it: a
// batch script has no need of recursion, and a static rule cannot tell.
// ts is root's templates, in the order to report them.
func checkIncludes(root *template.Template, ts []*template.Template) error {
	g := includeGraph{edges: map[string][]include{}, state: map[string]visitState{}}
	for _, t := range ts {
		for _, c := range includes(t) {
			if d := root.Lookup(c.Name); d == nil || d.Tree == nil || d.Tree.Root == nil {
				return nodeError(t.Tree, c, fmt.Sprintf("includes %q, which no template defines (a file name with .tmpl, or a {{define}})", c.Name))
			}
			g.edges[t.Name()] = append(g.edges[t.Name()], include{t.Tree, c})
		}
	}
	for _, t := range ts {
		if err := g.walk(t.Name()); err != nil {
			return err
		}
	}
	return nil
}

// include is a {{template}} action and the tree it is in, for its
// position.
type include struct {
	tree *parse.Tree
	node *parse.TemplateNode
}

// visitState is where a depth-first walk of the include graph stands
// with one template.
type visitState int

const (
	unvisited visitState = iota
	onPath               // being walked: an include of it closes a cycle
	done                 // walked, with everything it includes: no cycle there
)

// includeGraph is which template includes which, walked depth first for
// cycles; path is the templates being walked, outermost first.
type includeGraph struct {
	edges map[string][]include
	state map[string]visitState
	path  []string
}

func (g *includeGraph) walk(name string) error {
	if g.state[name] == done {
		return nil
	}
	g.state[name] = onPath
	g.path = append(g.path, name)
	for _, c := range g.edges[name] {
		if g.state[c.node.Name] == onPath {
			return nodeError(c.tree, c.node, g.cycle(c.node.Name))
		}
		if err := g.walk(c.node.Name); err != nil {
			return err
		}
	}
	g.path = g.path[:len(g.path)-1]
	g.state[name] = done
	return nil
}

// cycle describes the cycle that an include of name, which is on the
// path, closes.
func (g *includeGraph) cycle(name string) string {
	i := len(g.path) - 1
	for g.path[i] != name {
		i--
	}
	if i == len(g.path)-1 {
		return fmt.Sprintf("includes %q itself: a template may not include itself", name)
	}
	names := make([]string, 0, len(g.path)-i+1)
	for _, n := range append(g.path[i:], name) {
		names = append(names, fmt.Sprintf("%q", n))
	}
	return "makes an include cycle: " + strings.Join(names, " → ") + ": a template may not include itself, even through others"
}

// nodeError is a problem with a node of tree, as FILE:LINE:COL: {{action}} why.
func nodeError(tree *parse.Tree, n parse.Node, why string) error {
	loc, text := tree.ErrorContext(n)
	return fmt.Errorf("%s: %s %s", loc, text, why)
}
