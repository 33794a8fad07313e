package clitree

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/urfave/cli/v2"

	"github.com/batchkit/batchkit/internal/flagvalues"
)

func tree() *cli.App {
	return &cli.App{Name: "tool", Version: "v1", Commands: []*cli.Command{
		{Name: "run", Usage: "run it", Description: "Examples:\n   tool run -n 2 x", Flags: []cli.Flag{
			&cli.IntFlag{Name: "n", Usage: "ranks"}, &cli.BoolFlag{Name: "dry-run", Usage: "print"},
			flagvalues.With(&cli.StringFlag{Name: "color", Usage: "colour"}, flagvalues.List([]string{"red", "green", "grey"}))}},
		{Name: "secret", Hidden: true},
	}}
}

func TestCompletions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		words []string
		want  []string
	}{
		{"commands and help", []string{""}, []string{"run", "help"}},
		{"flags", []string{"run", "--d"}, []string{"--dry-run"}},
		{"a flag's value", []string{"run", "-n", ""}, nil},
		{"a flag's values", []string{"run", "--color", "gr"}, []string{"green", "grey"}},
		{"after bash's =", []string{"run", "--color", "=", ""}, []string{"red", "green", "grey"}},
		{"--flag=value as one word", []string{"run", "--color=r"}, []string{"--color=red"}},
		{"no value fits", []string{"run", "--color", "blue"}, nil},
		{"help NAME", []string{"help", "r"}, []string{"run"}},
		{"help takes one", []string{"help", "run", ""}, nil},
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
		Environment: [][2]string{{"TOOL_HOME", "where"}, {"TOOL_PIN", "1: as --pin (OMP_NUM_THREADS, *all* ranks)"}}, SeeAlso: "**sh**(1)"}.Render(tree()))
	for _, want := range []string{"tool run", "tool run -n 2 x", "bad usage", "TOOL_HOME", "sh", "OMP_NUM_THREADS, *all* ranks"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "secret") {
		t.Errorf("page shows the hidden command:\n%s", page)
	}
}
