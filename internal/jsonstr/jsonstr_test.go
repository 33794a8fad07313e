package jsonstr

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/internal/hostile"
)

func TestQuote(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"plain", "mpirun", `"mpirun"`},
		{"UTF-8 stays as it is", "é日本", `"é日本"`},
		{"quotes and backslashes", `a"b\c`, `"a\"b\\c"`},
		{"controls", "a\nb\tc\r\x01\x7f", `"a\nb\tc\r\u0001` + "\x7f" + `"`},
		{"JavaScript's line breaks", "a\u2028b\u2029", `"a\u2028b\u2029"`},
		{"a byte of invalid UTF-8", "a\xffb", `"a\udcffb"`},
		{"a cut rune: each byte", "\xe6\x97", `"\udce6\udc97"`},
		{"an encoded surrogate is invalid UTF-8: each byte", "\xed\xb3\xbf", `"\udced\udcb3\udcbf"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Quote(tt.in); got != tt.want {
				t.Errorf("Quote(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

// Every string, whatever its bytes, comes back as it went: the hostile
// strings, every single byte, every pair of bytes, and random bytes.
func TestRoundTrip(t *testing.T) {
	var in []string
	in = append(in, hostile.Strings(7, 200, true)...)
	for c := 0; c < 256; c++ {
		in = append(in, string([]byte{byte(c)}))
		for d := 0x80; d < 256; d += 7 {
			in = append(in, string([]byte{byte(c), byte(d)}))
		}
	}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 500; i++ {
		b := make([]byte, r.Intn(40))
		r.Read(b)
		in = append(in, string(b))
	}
	for _, s := range in {
		q := Quote(s)
		if !json.Valid([]byte(q)) || !utf8.ValidString(q) {
			t.Errorf("Quote(%q) = %q: not valid JSON in UTF-8", s, q)
			continue
		}
		if got, err := Unquote(q); err != nil || got != s {
			t.Errorf("Unquote(Quote(%q)) = %q, %v", s, got, err)
		}
	}
}

// What encoding/json writes is read as encoding/json reads it: escapes,
// surrogate pairs, a lone surrogate outside \udc80-\udcff as U+FFFD.
func TestUnquoteReadsJSON(t *testing.T) {
	for _, lit := range []string{`"a\/b\b\f\u00e9"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\udc7f"`, `"\ud83dx"`, `"é"`} {
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			t.Fatal(err)
		}
		if got, err := Unquote(lit); err != nil || got != want {
			t.Errorf("Unquote(%s) = %q, %v; want %q", lit, got, err, want)
		}
	}
	for _, bad := range []string{``, `"`, `"a`, `"\"`, `"\x41"`, `"\u12"`, `"\u+123"`, "\"a\nb\""} {
		if got, err := Unquote(bad); err == nil {
			t.Errorf("Unquote(%q) = %q, want an error", bad, got)
		}
	}
}

// String in a struct, through encoding/json both ways.
func TestStringInJSON(t *testing.T) {
	type plan struct {
		Argv []String          `json:"argv"`
		Env  map[string]String `json:"env"`
	}
	in := plan{Argv: Strings([]string{"echo", "\xff\xfe", "ok"}), Env: Map(map[string]string{"A": "x\x80y"})}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"argv":["echo","\udcff\udcfe","ok"],"env":{"A":"x\udc80y"}}`; string(b) != want || strings.Contains(string(b), "\n") {
		t.Errorf("Marshal = %s, want %s", b, want)
	}
	var out plan
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}
