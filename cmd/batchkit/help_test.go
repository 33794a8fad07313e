package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// Every command's --help shows examples: each command of the tree, groups
// included, as a user asks for it.
func TestEveryHelpHasExamples(t *testing.T) {
	var walk func(path []string, cmds []*cli.Command)
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Hidden {
				continue
			}
			words := append(append([]string{}, path...), c.Name)
			t.Run(strings.Join(words, " "), func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				if code := Main(append(append([]string{"batchkit"}, words...), "--help"), &stdout, &stderr); code != 0 {
					t.Fatalf("exit %d: %s", code, stderr.String())
				}
				if !strings.Contains(stdout.String(), "Example") {
					t.Errorf("batchkit %s --help has no examples:\n%s", strings.Join(words, " "), stdout.String())
				}
			})
			walk(words, c.Subcommands)
		}
	}
	t.Run("batchkit", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if code := Main([]string{"batchkit", "--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "Example") {
			t.Errorf("batchkit --help: exit %d, no examples:\n%s", code, stdout.String())
		}
	})
	walk(nil, newApp(nil, nil).Commands)
}
