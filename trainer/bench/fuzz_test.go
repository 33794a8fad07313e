package bench

import (
	"strings"
	"testing"
)

// FuzzParseSize: --min-bytes and --max-bytes take any text. ParseSize never
// panics, says what is wrong in one line, accepts only non-negative counts,
// and reads a FormatSize of what it returned back to the same value, give or
// take FormatSize's rounding.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"8", "64KiB", "1K", " 2 mb ", "1.5M", "0", "-1", "9223372036854775807", "8589934592G", "1e6", "KiB", "", "4\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\n") && !strings.ContainsAny(s, "\n") {
				t.Fatalf("ParseSize(%q): error is not one line: %q", s, msg)
			}
			return
		}
		if n < 0 {
			t.Fatalf("ParseSize(%q) = %d, want a non-negative count", s, n)
		}
		back := strings.ReplaceAll(FormatSize(n), " ", "")
		if strings.Contains(back, ".") || strings.HasSuffix(back, "TiB") {
			return // fractions and TiB are for people, not for ParseSize
		}
		// FormatSize rounds to two decimals: "88 MiB" for 87.996 MiB.
		if m, err := ParseSize(back); err != nil || m-n > n/200 || n-m > n/200 {
			t.Fatalf("ParseSize(%q) = %d; FormatSize gives %q, which reads back as %d, %v", s, n, back, m, err)
		}
	})
}
