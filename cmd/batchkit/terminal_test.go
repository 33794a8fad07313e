package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// fakeTerminal is a buffer that says it is a terminal (isTerminal).
type fakeTerminal struct{ bytes.Buffer }

func (*fakeTerminal) IsTerminal() bool { return true }

// Colour only on a terminal, and never there with NO_COLOR set (to
// anything but ""); --color always is the user's explicit request and wins.
func TestColorOnlyOnATerminalWithoutNoColor(t *testing.T) {
	doctor := []string{"doctor", "--profile", "local", "--python", "/nonexistent/python"} // a FAIL, in red
	run := []string{"run", "-n", "1", "--", "echo", "hi"}                                 // a [0] prefix
	tests := []struct {
		name     string
		terminal bool
		noColor  string
		args     []string
		color    bool
	}{
		{"doctor on a terminal", true, "", doctor, true},
		{"doctor on a terminal, NO_COLOR=1", true, "1", doctor, false},
		{"doctor on a terminal, NO_COLOR=0 is set too", true, "0", doctor, false},
		{"doctor to a file", false, "", doctor, false},
		{"run on a terminal", true, "", run, true},
		{"run on a terminal, NO_COLOR=1", true, "1", run, false},
		{"run to a file", false, "", run, false},
		{"run --color always, NO_COLOR=1", false, "1", append([]string{"run", "--color", "always"}, run[1:]...), true},
		{"run --color never on a terminal", true, "", append([]string{"run", "--color", "never"}, run[1:]...), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NO_COLOR", tt.noColor)
			var stdout interface {
				io.Writer
				fmt.Stringer
			} = &bytes.Buffer{}
			if tt.terminal {
				stdout = &fakeTerminal{}
			}
			var stderr bytes.Buffer
			Main(append([]string{"batchkit"}, tt.args...), stdout, &stderr)
			if got := strings.Contains(stdout.String(), "\x1b["); got != tt.color {
				t.Errorf("escapes in the output: %v, want %v; stdout %q, stderr %q", got, tt.color, stdout.String(), stderr.String())
			}
		})
	}
}

func TestUseColor(t *testing.T) {
	tests := []struct {
		name    string
		w       io.Writer
		noColor string
		want    bool
	}{
		{"terminal", &fakeTerminal{}, "", true},
		{"terminal, NO_COLOR", &fakeTerminal{}, "1", false},
		{"buffer", &bytes.Buffer{}, "", false},
	}
	for _, tt := range tests {
		getenv := func(k string) string {
			if k == "NO_COLOR" {
				return tt.noColor
			}
			return ""
		}
		if got := useColor(tt.w, getenv); got != tt.want {
			t.Errorf("%s: useColor = %v, want %v", tt.name, got, tt.want)
		}
	}
}
