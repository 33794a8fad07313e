package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"
)

// Result is the measurement of one size: one JSON line of `batchkit bench
// --format json`. The references print the same keys (backend "c-openmpi",
// "c-mpich" or "gloo").
type Result struct {
	Op         string  `json:"op"`
	Backend    string  `json:"backend"`               // the Comm's backend: "tcp", "mpi", "self"
	MPILibrary string  `json:"mpi_library,omitempty"` // collective.MPIBuilt, with backend "mpi"
	Label      string  `json:"label,omitempty"`       // the user's --label: the plot legend
	DType      string  `json:"dtype"`
	Ranks      int     `json:"ranks"`
	Bytes      int64   `json:"bytes"` // see the package documentation for what it counts
	Count      int64   `json:"count"` // elements in Bytes
	Iters      int     `json:"iters"`
	Warmup     int     `json:"warmup"`
	AvgUs      float64 `json:"avg_us"` // microseconds per operation: mean of the ranks' means
	MinUs      float64 `json:"min_us"` // ... the fastest rank's mean
	MaxUs      float64 `json:"max_us"` // ... the slowest rank's mean
	AlgBW      float64 `json:"algbw_gbs"`
	BusBW      float64 `json:"busbw_gbs"`
}

// Series names the line a result belongs to in a plot or a comparison: its
// label, else its backend (with the MPI library, if any).
func (r Result) Series() string {
	switch {
	case r.Label != "":
		return r.Label
	case r.MPILibrary != "":
		return r.Backend + " (" + r.MPILibrary + ")"
	}
	return r.Backend
}

// round keeps d decimals: JSON lines stay short and diffable.
func round(x float64, d int) float64 {
	p := math.Pow(10, float64(d))
	return math.Round(x*p) / p
}

// requiredKeys must be present in every line ReadResults accepts.
var requiredKeys = []string{"op", "backend", "dtype", "ranks", "bytes", "iters", "avg_us", "algbw_gbs", "busbw_gbs"}

// runPrefix is the "[3] " that batchkit run puts before each rank's lines:
// a run's redirected output reads as it is.
var runPrefix = regexp.MustCompile(`^\[\d+\] `)

// ReadResults reads JSON lines of results. Blank lines and lines starting
// with '#' are skipped, and a "[N] " rank prefix (batchkit run's) is
// removed. name is the file's name for error messages.
func ReadResults(r io.Reader, name string) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(runPrefix.ReplaceAllString(sc.Text(), ""))
		if text == "" || strings.HasPrefix(text, "#") || isHealth(text) {
			continue
		}
		res, err := parseResult([]byte(text))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		out = append(out, res)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no results (want JSON lines from bench --format json)", name)
	}
	return out, nil
}

// isHealth: the health report's line of a run with --report, which is
// not a result.
func isHealth(line string) bool {
	var keys map[string]json.RawMessage
	if !strings.HasPrefix(line, `{"health":`) || json.Unmarshal([]byte(line), &keys) != nil {
		return false
	}
	_, ok := keys["health"]
	return ok && len(keys) == 1
}

func parseResult(b []byte) (Result, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return Result{}, fmt.Errorf("not a JSON object: %v", err)
	}
	if _, ok := keys["ref_backend"]; ok {
		return Result{}, fmt.Errorf("a comparison line (bench --baseline), not a result")
	}
	var missing []string
	for _, k := range requiredKeys {
		if _, ok := keys[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return Result{}, fmt.Errorf("not a bench result: missing %s", strings.Join(missing, ", "))
	}
	var res Result
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&res); err != nil {
		return Result{}, fmt.Errorf("bad result: %v", err)
	}
	switch {
	case res.Bytes <= 0:
		return Result{}, fmt.Errorf("bytes %d: must be positive", res.Bytes)
	case res.Ranks < 1:
		return Result{}, fmt.Errorf("ranks %d: must be at least 1", res.Ranks)
	case res.Op == "" || res.Backend == "":
		return Result{}, fmt.Errorf("empty op or backend")
	case res.AvgUs < 0 || res.BusBW < 0 || math.IsNaN(res.AvgUs) || math.IsNaN(res.BusBW):
		return Result{}, fmt.Errorf("negative or NaN avg_us or busbw_gbs")
	}
	return res, nil
}

// seriesKey identifies one curve: the same series, op, dtype and world size.
type seriesKey struct {
	Series, Op, DType string
	Ranks             int
}

func keyOf(r Result) seriesKey {
	return seriesKey{Series: r.Series(), Op: r.Op, DType: r.DType, Ranks: r.Ranks}
}

type series struct {
	key     seriesKey
	results []Result // in input order
}

// group splits results into series in order of first appearance. A size
// seen twice in a series is an error: two runs of the same configuration
// need distinct labels (bench --label) to be told apart.
func group(results []Result) ([]series, error) {
	var out []series
	index := map[seriesKey]int{}
	seen := map[seriesKey]map[int64]bool{}
	for _, r := range results {
		k := keyOf(r)
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, series{key: k})
			seen[k] = map[int64]bool{}
		}
		if seen[k][r.Bytes] {
			return nil, fmt.Errorf("two results for %s %s %s, %d ranks, %d bytes: give the runs distinct labels (bench --label)",
				k.Series, k.Op, k.DType, k.Ranks, r.Bytes)
		}
		seen[k][r.Bytes] = true
		out[i].results = append(out[i].results, r)
	}
	return out, nil
}

// Best keeps, for every series and size that appears more than once (the
// same benchmark run several times), the result with the lowest avg_us:
// "best of N", the usual way to set aside noise from a shared machine.
// Order of first appearance is kept.
func Best(results []Result) []Result {
	type at struct {
		key   seriesKey
		bytes int64
	}
	index := map[at]int{}
	var out []Result
	for _, r := range results {
		k := at{keyOf(r), r.Bytes}
		i, ok := index[k]
		switch {
		case !ok:
			index[k] = len(out)
			out = append(out, r)
		case r.AvgUs < out[i].AvgUs:
			out[i] = r
		}
	}
	return out
}
