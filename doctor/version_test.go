package doctor

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Version
		err  bool
	}{
		{in: "1.13.0", want: Version{Major: 1, Minor: 13}},
		{in: "1.13.0a0", want: Version{Major: 1, Minor: 13, Pre: "a0"}},
		{in: "1.13.0a0+git7c98e70", want: Version{Major: 1, Minor: 13, Pre: "a0", Local: "git7c98e70"}},
		{in: "2.1.0a0+cxx11.abi", want: Version{Major: 2, Minor: 1, Pre: "a0", Local: "cxx11.abi"}},
		{in: "2.1.0.post0+cxx11.abi", want: Version{Major: 2, Minor: 1, Pre: ".post0", Local: "cxx11.abi"}},
		{in: "1.12.100+cpu", want: Version{Major: 1, Minor: 12, Patch: 100, Local: "cpu"}},
		{in: "2.1.10+xpu", want: Version{Major: 2, Minor: 1, Patch: 10, Local: "xpu"}},
		{in: "2.2.0rc1", want: Version{Major: 2, Minor: 2, Pre: "rc1"}},
		{in: "2.3.0.dev20240101", want: Version{Major: 2, Minor: 3, Pre: ".dev20240101"}},
		{in: "1.13", want: Version{Major: 1, Minor: 13}},
		{in: "1.13.post1", want: Version{Major: 1, Minor: 13, Pre: ".post1"}},
		{in: "1.13rc1", want: Version{Major: 1, Minor: 13, Pre: "rc1"}},
		{in: " v2.0.1\n", want: Version{Major: 2, Minor: 0, Patch: 1}},
		{in: "", err: true},
		{in: "dev", err: true},
		{in: "2", err: true},
		{in: "2.x", err: true},
	} {
		got, err := ParseVersion(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("ParseVersion(%q) error %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseVersion(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func mustVersion(t *testing.T, s string) Version {
	t.Helper()
	v, err := ParseVersion(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMatchBindings(t *testing.T) {
	for _, tc := range []struct {
		torch, bind string
		want        Match
	}{
		{"1.12.0", "1.12.0", Matches},
		{"1.12.1", "1.12.100", Matches},
		{"1.12.0", "1.12.100", Mismatch},
		{"1.12.1", "1.12.0", Mismatch},
		{"2.0.1", "2.0.100+cpu", Matches},
		{"2.0.1+cpu", "2.0.100", Matches},
		{"1.13.0a0", "1.13.0", Matches}, // Debian's torch
		{"1.13.1", "1.13.100+cpu", Matches},
		{"1.13.0", "1.12.0", Mismatch},
		{"2.1.0", "1.13.0", Mismatch},
		{"2.1.0+cpu", "2.1.0+cpu", Matches},
		{"2.1.0a0+cxx11.abi", "2.1.100+xpu", Matches}, // the documented 2.1.x00 series
		{"2.1.0.post0+cxx11.abi", "2.1.300+xpu", Matches},
		{"2.1.1", "2.1.100+xpu", Mismatch},
		{"2.3.1+cxx11.abi", "2.3.100+xpu", Matches},
		{"2.3.0", "2.3.100+xpu", Mismatch},
		{"2.8.0", "2.8.0+xpu", Matches},
	} {
		got, builtFor := MatchBindings(mustVersion(t, tc.torch), mustVersion(t, tc.bind))
		if got != tc.want {
			t.Errorf("MatchBindings(torch %s, bindings %s) = %v (built for %s), want %v", tc.torch, tc.bind, got, builtFor, tc.want)
		}
	}
}

func TestBindingsFor(t *testing.T) {
	for _, tc := range []struct{ torch, want string }{
		{"1.13.0a0", "1.13.0"}, {"1.12.1", "1.12.100"}, {"2.0.1+cpu", "2.0.100"}, {"2.3.1", "2.3.100"},
	} {
		if diff := cmp.Diff(tc.want, BindingsFor(mustVersion(t, tc.torch))); diff != "" {
			t.Errorf("BindingsFor(%s) (-want +got):\n%s", tc.torch, diff)
		}
	}
}

func TestMatchIPEX(t *testing.T) {
	for _, tc := range []struct {
		torch, ipex string
		want        Match
	}{
		{"2.1.0a0+cxx11.abi", "2.1.10+xpu", Matches},
		{"2.1.0.post0+cxx11.abi", "2.1.20+xpu", Matches},
		{"2.1.1", "2.1.10+xpu", Matches}, // same major.minor: documented as v2.1.*
		{"2.3.1+cxx11.abi", "2.3.110+xpu", Matches},
		{"1.13.0a0", "1.13.100+cpu", Matches},
		{"1.13.1", "1.12.300+cpu", Mismatch},
		{"2.2.0", "2.1.10+xpu", Mismatch},
		{"2.1.0", "1.13.10+xpu", Mismatch},
	} {
		if got := MatchIPEX(mustVersion(t, tc.torch), mustVersion(t, tc.ipex)); got != tc.want {
			t.Errorf("MatchIPEX(torch %s, ipex %s) = %v, want %v", tc.torch, tc.ipex, got, tc.want)
		}
	}
}
