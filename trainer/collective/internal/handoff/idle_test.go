package handoff

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseIdlePoll(t *testing.T) {
	us := time.Microsecond
	for _, tc := range []struct {
		name, in string
		want     IdlePoll
		err      bool
	}{
		{"unset: the default", "", IdlePollDefault, false},
		{"min and max", "5,100", IdlePoll{5 * us, 100 * us}, false},
		{"spaces", " 1 , 1 ", IdlePoll{us, us}, false},
		{"one value", "5", IdlePoll{}, true},
		{"max below min", "10,5", IdlePoll{}, true},
		{"zero: would spin", "0,10", IdlePoll{}, true},
		{"a unit", "5us,10us", IdlePoll{}, true},
		{"above a second", "1,2000000", IdlePoll{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseIdlePoll(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("error %v, want error %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
