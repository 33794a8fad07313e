package flagvalues

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/urfave/cli/v2"
)

type color string

func TestOf(t *testing.T) {
	colors := With(&cli.StringFlag{Name: "color"}, List([]color{"red", "green", "grey"}))
	shapes := With(&cli.StringFlag{Name: "shape"}, Keys(map[string]int{"square": 4, "circle": 0, "star": 5}))
	plain := &cli.StringFlag{Name: "name"}
	for _, tc := range []struct {
		name   string
		f      cli.Flag
		prefix string
		want   []string
	}{
		{"all, in the set's order", colors, "", []string{"red", "green", "grey"}},
		{"a prefix", colors, "gr", []string{"green", "grey"}},
		{"none fits", colors, "blue", nil},
		{"a table's keys, sorted", shapes, "", []string{"circle", "square", "star"}},
		{"a flag without values", plain, "", nil},
		{"no flag", nil, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Of(tc.f, tc.prefix)); diff != "" {
				t.Errorf("Of (-want +got):\n%s", diff)
			}
		})
	}
	if colors.Names()[0] != "color" || !colors.(interface{ TakesValue() bool }).TakesValue() {
		t.Error("a Flag is not the StringFlag it holds")
	}
}
