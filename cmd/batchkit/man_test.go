package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/envvars"
)

// The man page has a section for every visible command, with its
// examples, and the exit status table; it is roff for section 1.
func TestManPage(t *testing.T) {
	app := newApp(nil, nil)
	page := string(manPage(app))
	if !strings.HasPrefix(page, ".nh\n.TH batchkit 1 ") {
		t.Errorf("page starts %q, want .TH batchkit 1", page[:min(len(page), 40)])
	}
	var walk func(parent string, cmds []*cli.Command)
	walk = func(parent string, cmds []*cli.Command) {
		for _, c := range cmds {
			name := parent + " " + c.Name
			has := strings.Contains(page, "\n.SS "+name+"\n")
			if has == c.Hidden {
				t.Errorf("section %q in the man page: %v, want %v", name, has, !c.Hidden)
			}
			walk(name, c.Subcommands)
		}
	}
	walk("batchkit", app.Commands)
	sections := regexp.MustCompile(`(?m)^\.SS `).FindAllStringIndex(page, -1)
	for i, s := range sections {
		end := len(page)
		if i+1 < len(sections) {
			end = sections[i+1][0]
		}
		if sec := page[s[0]:end]; !strings.Contains(sec, "Example") {
			t.Errorf("man page section without examples:\n%s", sec)
		}
	}
	// ENVIRONMENT: every BATCHKIT_* variable batchkit reads (envvars.Read,
	// which envvars' TestReadIsComplete keeps complete), not 3 of them.
	for _, v := range envvars.Read {
		if !strings.Contains(page, "\n\\fB"+v.Name+"\\fP\n") {
			t.Errorf("the man page's ENVIRONMENT lacks %s", v.Name)
		}
	}
	for _, e := range exitStatuses {
		if !strings.Contains(page, "\n\\fB"+e.Status+"\\fP\n") {
			t.Errorf("the man page's EXIT STATUS lacks %s", e.Status)
		}
	}
}
