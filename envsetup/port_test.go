package envsetup

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMasterPort(t *testing.T) {
	free := func() (int, error) { return 40123, nil }
	for _, tc := range []struct {
		name string
		in   PortInput
		want Port
	}{
		{"--master-port over all", PortInput{Flag: 6000, Given: "5000", GivenSet: true, Fixed: 7000, JobID: "7", Free: free}, Port{"6000", PortFlag}},
		{"given over the profile's", PortInput{Given: "5000", GivenSet: true, Fixed: 7000, JobID: "7", Free: free}, Port{"5000", PortGiven}},
		// Detection, not the policy, checks a given value.
		{"given as it is, even empty", PortInput{GivenSet: true, Fixed: 7000}, Port{"", PortGiven}},
		{"the profile's over the job's", PortInput{Fixed: 7000, JobID: "7", Free: free}, Port{"7000", PortFixed}},
		{"the job's over a free one", PortInput{JobID: "7", Free: free}, Port{"15007", PortJob}},
		{"a job step's", PortInput{JobID: "7.2"}, Port{"23798", PortJob}},
		{"a free one outside a job", PortInput{Free: free}, Port{"40123", PortFree}},
		{"nothing known: each rank's", PortInput{}, Port{"", PortLater}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MasterPort(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	none := errors.New("none")
	_, err := MasterPort(PortInput{Free: func() (int, error) { return 0, none }})
	if !errors.Is(err, none) {
		t.Errorf("no free port: got %v, want it wrapped", err)
	}
}

// A batch script exports the profile's variables and a fixed port; the
// user's value over them is the script's to apply at run time.
func TestBatchEnv(t *testing.T) {
	vars := map[string]string{"CCL_WORKER_COUNT": "1", "FI_PROVIDER": "tcp"}
	for _, tc := range []struct {
		name  string
		vars  map[string]string
		fixed int
		want  map[string]string
	}{
		{"the profile's", vars, 0, map[string]string{"CCL_WORKER_COUNT": "1", "FI_PROVIDER": "tcp"}},
		{"and a fixed port", vars, 12345, map[string]string{"CCL_WORKER_COUNT": "1", "FI_PROVIDER": "tcp", "MASTER_PORT": "12345"}},
		{"nothing", nil, 0, map[string]string{}},
	} {
		got := BatchEnv(tc.vars, tc.fixed)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	if _, ok := vars["MASTER_PORT"]; ok {
		t.Error("BatchEnv changed the profile's map")
	}
}
