package slurm

import (
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadHostlist(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      io.Reader
		want    []string
		wantErr string
	}{
		{"one a line", strings.NewReader("n1\nn2\nn3\n"), []string{"n1", "n2", "n3"}, ""},
		{"no final newline", strings.NewReader("n1\nn2"), []string{"n1", "n2"}, ""},
		{"comma-separated", strings.NewReader("n1,n2 n3\tn4\n"), []string{"n1", "n2", "n3", "n4"}, ""},
		{"expressions keep their commas", strings.NewReader("n[1-2,5]\ngpu1\n"), []string{"n1", "n2", "n5", "gpu1"}, ""},
		{"blank lines", strings.NewReader("\n\nn1\n\n"), []string{"n1"}, ""},
		{"CRLF line ends", strings.NewReader("n1\r\nn2\r\n"), []string{"n1", "n2"}, ""},
		{"bad line named", strings.NewReader("n1\nn[1-\n"), nil, `standard input line 2: invalid hostlist "n[1-"`},
		{"NUL bytes", io.LimitReader(zeros{}, 1<<20), nil, "standard input line 1: invalid hostlist"},
		{"endless zeros", zeros{}, nil, "standard input: a line longer than"},
		{"too many hosts", strings.NewReader(strings.Repeat("n[0-65535]\n", 16) + "x\n"), nil, "standard input: more than 1048576 hosts"},
		{"empty", strings.NewReader(""), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadHostlist(tc.in, "standard input")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error is not one line: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ReadHostlist (-want +got):\n%s", diff)
			}
		})
	}
}

// zeros reads as /dev/zero does.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
