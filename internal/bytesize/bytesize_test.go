package bytesize

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFormat(t *testing.T) {
	in := []int64{0, 8, 1000, 1023, 1024, 1536, 1020 * 3, 64 << 10, 1<<20 + 1, 64 << 20, 3 << 30, 1 << 40}
	want := []string{"0 B", "8 B", "1000 B", "1023 B", "1 KiB", "1.5 KiB", "2.99 KiB", "64 KiB", "1 MiB", "64 MiB", "3 GiB", "1 TiB"}
	var got []string
	for _, b := range in {
		got = append(got, Format(b))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Format (-want +got):\n%s", diff)
	}
}
