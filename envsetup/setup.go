package envsetup

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/batchkit/batchkit/internal/shquote"
)

// Setup is what is sourced before a launch: a profile's [env] scripts
// (profile.Env.Setup builds it) and any more, then the oneCCL bindings'
// setvars.sh and the Intel wheels' variables.
type Setup struct {
	Scripts        []Script
	OneCCLBindings bool
	Python         string // the interpreter that finds the bindings
	Wheels         string // the wheels' prefix (WheelsPrefix), "" for none
}

// Empty reports whether s sources nothing.
func (s Setup) Empty() bool { return len(s.Scripts) == 0 && !s.OneCCLBindings && s.Wheels == "" }

// Source sources s in one real bash started with environ, within timeout
// (Runner.SourceWithWheels), and returns what it changed.
func (s Setup) Source(ctx context.Context, environ []string, timeout time.Duration) (Changes, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	return Runner{Timeout: timeout}.SourceWithWheels(ctx, environ, s.Scripts, s.OneCCLBindings, s.Python, s.Wheels)
}

// Shell is the bash lines that would source s, for a dry run: 'source'
// lines, then the bindings' and the wheels' set-up.
func (s Setup) Shell() (string, error) {
	var b strings.Builder
	for _, sc := range s.Scripts {
		line, err := shquote.Join(append([]string{"source", sc.Path}, sc.Args...))
		if err != nil {
			return "", err
		}
		b.WriteString(line + "\n")
	}
	if s.OneCCLBindings {
		text, err := BindingsShell(s.Python)
		if err != nil {
			return "", err
		}
		b.WriteString(text)
	}
	if s.Wheels != "" {
		text, err := WheelsShell(s.Wheels, shquote.Quote)
		if err != nil {
			return "", err
		}
		b.WriteString(text)
	}
	return b.String(), nil
}

// WriteShell writes c as 'unset' lines, then 'export' lines, each in name
// order: text for eval in sh, bash or zsh.
func (c Changes) WriteShell(w io.Writer) error {
	var b strings.Builder
	for _, k := range c.Unset {
		fmt.Fprintf(&b, "unset %s\n", k)
	}
	names := make([]string, 0, len(c.Set))
	for k := range c.Set {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		q, err := shquote.Quote(c.Set[k])
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		fmt.Fprintf(&b, "export %s=%s\n", k, q)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes c as one JSON object on one line: {"set": {...},
// "unset": [...]}, both present when empty.
func (c Changes) WriteJSON(w io.Writer) error {
	if c.Set == nil {
		c.Set = map[string]string{}
	}
	if c.Unset == nil {
		c.Unset = []string{}
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
