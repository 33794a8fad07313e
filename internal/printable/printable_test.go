package printable

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"Slurmctld(primary) at ctl is UP", 0, "Slurmctld(primary) at ctl is UP"},
		{"mpirun → /usr/bin/mpirun: 2 × 4, é, 日本", 0, "mpirun → /usr/bin/mpirun: 2 × 4, é, 日本"},
		// A window title, a cleared screen, the cursor sent home.
		{"\x1b]0;PWNED\a\x1b[2J\x1b[HUP", 0, `\x1b]0;PWNED\a\x1b[2J\x1b[HUP`},
		{"a\r\nb\tc\x00d\x7fe", 0, `a\r\nb\tc\x00d\x7fe`},
		{"csi \u009b2J, bidi \u202eevil\u202c, nbsp\u00a0", 0, `csi \u009b2J, bidi \u202eevil\u202c, nbsp\u00a0`},
		{"bad \xff\xfe utf8, a real \ufffd", 0, `bad \xff\xfe utf8, a real ` + "\ufffd"},
		{`C:\path\x1b stays`, 0, `C:\path\x1b stays`},
		{"", 10, ""},
		{"0123456789", 10, "0123456789"},
		// The note's room is for N as long as len(s): 20 bytes here.
		{strings.Repeat("y", 100), 30, strings.Repeat("y", 10) + "… [90 more bytes]"},
		{strings.Repeat("\x1b", 100), 40, strings.Repeat(`\x1b`, 5) + "… [95 more bytes]"},
		// A rune is not split.
		{strings.Repeat("日", 30), 30, "日日日" + "… [81 more bytes]"},
		{"0123456789", 5, "01234"}, // no room for a note
	} {
		got := Line(tc.in, tc.max)
		if got != tc.want {
			t.Errorf("Line(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
		if tc.max > 0 && len(got) > tc.max {
			t.Errorf("Line(%q, %d) is %d bytes", tc.in, tc.max, len(got))
		}
	}
}

func TestQuote(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"hello", 0, `"hello"`},
		{"a\x1b[2J\"b\\", 0, `"a\x1b[2J\"b\\"`},
		// The note's room is for N as long as len(s): 20 bytes here.
		{strings.Repeat("y", 100), 30, `"` + strings.Repeat("y", 8) + `"… [92 more bytes]`},
	} {
		if got := Quote(tc.in, tc.max); got != tc.want {
			t.Errorf("Quote(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
	// Uncut, it is strconv.Quote.
	for _, s := range []string{"", "x\xff\x00\u202e\"", "日本\n"} {
		if got, want := Quote(s, 100), strconv.Quote(s); got != want {
			t.Errorf("Quote(%q) = %q, want %q", s, got, want)
		}
	}
}

// Whatever the input: valid UTF-8, nothing a terminal acts on, within max,
// and a second pass changes nothing.
func FuzzLine(f *testing.F) {
	for _, s := range []string{"", "UP", "\x1b]0;t\a\x1b[2J", "a\r\nb", "\xff\xfe\x00", "\u009b\u202e\u2028", strings.Repeat("日\x1b", 40)} {
		f.Add(s, 0)
		f.Add(s, 24)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		max %= 1 << 12
		got := Line(s, max)
		if !utf8.ValidString(got) {
			t.Fatalf("Line(%q, %d) = %q: invalid UTF-8", s, max, got)
		}
		for _, r := range got {
			if !strconv.IsPrint(r) {
				t.Fatalf("Line(%q, %d) = %q holds %U", s, max, got, r)
			}
		}
		if max > 0 && len(got) > max {
			t.Fatalf("Line(%q, %d) = %q: %d bytes", s, max, got, len(got))
		}
		if again := Line(got, max); again != got {
			t.Fatalf("Line(Line(%q, %d)) = %q, not %q", s, max, again, got)
		}
		if max <= 0 && Line(s, 0) != Line(s, len(got)) {
			t.Fatalf("Line(%q) cut at its own length", s)
		}
	})
}
