package topology

import (
	"fmt"
	"strconv"
	"strings"
)

// VarError reports a variable whose value is unusable.
type VarError struct {
	Var, Value string
	Msg        string
	Err        error
}

func (e *VarError) Error() string { return fmt.Sprintf("%s=%q: %s", e.Var, e.Value, e.Msg) }
func (e *VarError) Unwrap() error { return e.Err }

// ConflictError reports two variables of one launcher that disagree. We refuse
// to guess which one is right: a wrong rank silently corrupts a training run.
type ConflictError struct {
	What       string // "rank", "world size", ...
	A, AValue  string
	B, BValue  string
	Launcher   Launcher
	Resolution string // optional hint
}

func (e *ConflictError) Error() string {
	msg := fmt.Sprintf("conflicting %s in the %s environment: %s=%s but %s=%s",
		e.What, e.Launcher, e.A, plain(e.AValue), e.B, plain(e.BValue))
	if e.Resolution != "" {
		msg += " (" + e.Resolution + ")"
	}
	return msg
}

// IncompleteError reports a launcher that set some of its variables but not
// one we cannot do without (a rank without a size).
type IncompleteError struct {
	Launcher   Launcher
	Have       string // a variable that is set
	HaveValue  string
	MissingAny []string // none of these is set
}

func (e *IncompleteError) Error() string {
	return fmt.Sprintf("incomplete %s environment: %s=%s is set but %s is not",
		e.Launcher, e.Have, plain(e.HaveValue), strings.Join(e.MissingAny, " / "))
}

// plain shows a value as is when it is one printable word, else quoted:
// an error stays one line whatever the environment holds.
func plain(v string) string {
	if v == "" || strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f || !strconv.IsPrint(r) }) {
		return strconv.Quote(v)
	}
	return v
}

// Value is one integer read from the environment with the variable it came from.
type Value struct {
	Var string
	Raw string
	N   int
}

// Set reports whether the value was found.
func (v Value) Set() bool { return v.Var != "" }

// ParseCount parses a non-negative decimal integer variable value.
func ParseCount(name, raw string) (int, error) {
	s := strings.TrimSpace(raw)
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, &VarError{Var: name, Value: raw, Msg: "not an integer", Err: err}
	}
	if n < 0 {
		return 0, &VarError{Var: name, Value: raw, Msg: "must not be negative"}
	}
	return n, nil
}

// Int reads the first set variable of aliases as a non-negative integer. All
// aliases that are set must agree, otherwise a ConflictError names both.
func Int(getenv Getenv, l Launcher, what string, aliases ...string) (Value, error) {
	var first Value
	for _, name := range aliases {
		raw := getenv(name)
		if raw == "" {
			continue
		}
		n, err := ParseCount(name, raw)
		if err != nil {
			return Value{}, err
		}
		if !first.Set() {
			first = Value{Var: name, Raw: raw, N: n}
			continue
		}
		if n != first.N {
			return Value{}, &ConflictError{What: what, Launcher: l, A: first.Var, AValue: first.Raw, B: name, BValue: raw}
		}
	}
	return first, nil
}

// AnySet reports the first of names that is set, or "".
func AnySet(getenv Getenv, names ...string) string {
	for _, n := range names {
		if getenv(n) != "" {
			return n
		}
	}
	return ""
}

// FirstString returns the value of the first set variable among names.
func FirstString(getenv Getenv, names ...string) string {
	for _, n := range names {
		if v := getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// LayerConflictError reports two launcher layers that both claim this
// process with different ranks or sizes, typically torchrun variables left in
// the environment by an outer job under a real launcher. Like ConflictError
// it refuses to guess: picking either side silently runs a wrong job.
type LayerConflictError struct {
	Inner, Outer         Launcher
	InnerRank, InnerSize Value
	OuterRank, OuterSize Value
	Resolution           string // optional hint: the likely cause and the fix
}

func (e *LayerConflictError) Error() string {
	msg := fmt.Sprintf("%s=%s %s=%s (%s) disagree with %s=%s %s=%s (%s)",
		e.InnerRank.Var, e.InnerRank.Raw, e.InnerSize.Var, e.InnerSize.Raw, e.Inner,
		e.OuterRank.Var, e.OuterRank.Raw, e.OuterSize.Var, e.OuterSize.Raw, e.Outer)
	if e.Resolution != "" {
		msg += ": " + e.Resolution
	}
	return msg
}
