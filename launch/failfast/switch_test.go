package failfast

import "testing"

func TestChoose(t *testing.T) {
	for _, tc := range []struct {
		name    string
		given   []string
		env     []string
		want    string
		wantErr string
	}{
		{"neither", nil, []string{"BATCHKIT_FAIL_FAST=1"}, "", ""},
		{"off", []string{"no-fail-fast"}, []string{"A=1"}, "0", ""},
		{"on", []string{"fail-fast"}, nil, "1", ""},
		{"both", []string{"no-fail-fast", "fail-fast"}, nil, "", "--no-fail-fast and --fail-fast: choose one"},
		{"flag and --env", []string{"fail-fast"}, []string{"BATCHKIT_FAIL_FAST=0"}, "", "--fail-fast and --env BATCHKIT_FAIL_FAST=0: both set BATCHKIT_FAIL_FAST; give one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			given := func(f string) bool {
				for _, g := range tc.given {
					if g == f {
						return true
					}
				}
				return false
			}
			got, err := Choose(given, tc.env)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if got != tc.want || gotErr != tc.wantErr {
				t.Errorf("Choose = %q, %q; want %q, %q", got, gotErr, tc.want, tc.wantErr)
			}
		})
	}
}
