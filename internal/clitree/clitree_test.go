package clitree

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/urfave/cli/v2"
)

func tree() *cli.App {
	return &cli.App{Name: "tool", Version: "v1", Commands: []*cli.Command{
		{Name: "run", Usage: "run it", Description: "Examples:\n   tool run -n 2 x", Flags: []cli.Flag{
			&cli.IntFlag{Name: "n", Usage: "ranks"}, &cli.BoolFlag{Name: "dry-run", Usage: "print"}}},
		{Name: "secret", Hidden: true},
	}}
}

func TestCompletions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		words []string
		want  []string
	}{
		{"commands", []string{""}, []string{"run"}},
		{"flags", []string{"run", "--d"}, []string{"--dry-run"}},
		{"a flag's value", []string{"run", "-n", ""}, nil},
		{"after --", []string{"run", "--", "-"}, nil},
		{"unknown command", []string{"nope", ""}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Completions(tree(), tc.words)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if words, ok := CompletionRequest([]string{"tool", "run", "", CompletionFlag}); !ok || !cmp.Equal(words, []string{"run", ""}) {
		t.Errorf("CompletionRequest = %q, %v", words, ok)
	}
}

// The page has every visible command with its description, the extra
// sections, and no hidden command.
func TestManPageRender(t *testing.T) {
	page := string(ManPage{ExitStatuses: [][3]string{{"2", "bad usage", "every command"}},
		Environment: [][2]string{{"TOOL_HOME", "where"}}, SeeAlso: "**sh**(1)"}.Render(tree()))
	for _, want := range []string{"tool run", "tool run -n 2 x", "bad usage", "TOOL_HOME", "sh"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "secret") {
		t.Errorf("page shows the hidden command:\n%s", page)
	}
}
