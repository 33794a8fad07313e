package detect

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/batchkit/batchkit/topology"
)

// The environments of real Intel MPI ranks (testdata/intelmpi, captured by
// scripts/capture-intel-env.sh): Hydra on one host, Hydra inside a batch
// job (its proxies in a Slurm step of their own, whose SLURM_PROCID,
// SLURM_LOCALID and SLURM_NPROCS are the proxies', and SLURM_NTASKS the
// job's, forwarded by Hydra: the two aliases disagree), and srun
// --mpi=pmi2 (PMI_RANK/PMI_SIZE, no MPI_LOCALRANKID: Slurm's step places
// the rank). Each file's "# want:" line is the truth the launch had.
func TestIntelMPIFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/intelmpi/*.env")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in testdata/intelmpi: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			vars, want := readFixture(t, f)
			top, err := Detect(topology.MapEnv(vars), Options{})
			if err != nil {
				t.Fatalf("Detect: %v", err)
			}
			got := strings.Join([]string{"launcher=" + string(top.Launcher), "rank=" + strconv.Itoa(top.Rank), "world=" + strconv.Itoa(top.WorldSize),
				"local=" + strconv.Itoa(top.LocalRank) + "/" + strconv.Itoa(top.LocalWorldSize), "node=" + strconv.Itoa(top.NodeRank) + "/" + strconv.Itoa(top.NumNodes)}, " ")
			if got != want {
				t.Errorf("Detect says\n\t%s\nthe launch was\n\t%s", got, want)
			}
		})
	}
}

func readFixture(t *testing.T, path string) (map[string]string, string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vars, want := map[string]string{}, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if w, ok := strings.CutPrefix(line, "# want: "); ok {
			want = w
			continue
		}
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: bad line %q", path, line)
		}
		vars[k] = v
	}
	if want == "" {
		t.Fatalf("%s has no # want: line", path)
	}
	return vars, want
}
