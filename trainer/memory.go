package trainer

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/batchkit/batchkit/internal/nodemem"
)

// What Train takes on a rank, estimated before anything is allocated, so
// that a model or a batch too large for the node is refused in one line
// rather than ended by the OOM killer or a failed allocation.

// Bytes per parameter, measured as the most resident memory of a run of
// --hidden 4000,4000 (16.3 M parameters, 1 rank): 41.6 without a
// checkpoint directory, 50.7 writing checkpoints, 52 resuming. Four buffers
// of 4 bytes a parameter live through the run (weights, gradient,
// momentum, the weight check's bytes); the result's copy and its hash's
// bytes, the collective's scratch come on top, and Go's collector lets the
// heap grow to about twice what is live between collections. A checkpoint
// is its file's bytes (8 a parameter), written or read, and a resume's
// decoded copy.
const (
	bytesPerParam           = 44
	checkpointBytesPerParam = 16
	runtimeBytes            = 24 << 20 // the Go runtime, the binary, the collective's connections
	evalRows                = 256      // Evaluate's batch
)

// stepRows is the rows of a step: batch, or a rank's whole shard of the n
// samples when that is smaller (every step takes at most the shard).
func stepRows(n, world, batch int) int { return min(batch, ShardSize(n, world)) }

// MemoryNeed is an estimate of the most Train takes on one rank of a world
// of world ranks with cfg, for model m and the data (which are counted: a
// rank holds them throughout).
func MemoryNeed(m MLP, train, test *Dataset, cfg Config, world int) int64 {
	perParam := float64(bytesPerParam)
	if cfg.CheckpointDir != "" {
		perParam += checkpointBytesPerParam
	}
	units := 0
	for _, s := range m.Sizes {
		units += s
	}
	b := float64(stepRows(train.Rows(), world, cfg.BatchSize))
	classes := float64(m.Sizes[len(m.Sizes)-1])
	step := 4 * (2*b*float64(units) + b*float64(m.Sizes[0]+1)) // activations and their gradients; the batch's copy
	eval := 4 * (2*evalRows*float64(units) + evalRows*classes)
	data := 4 * float64(len(train.X)+len(test.X)+len(train.Y)+len(test.Y))
	need := runtimeBytes + perParam*float64(m.NumParams()) + step + eval + data
	if need >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(need)
}

// CheckMemory refuses a run that would not fit: MemoryNeed for each of the
// node's ranksOnNode ranks against avail, the memory the node has for them
// (nodemem.Available; 0 when unknown, never refused). The error names the
// model and the batch.
func CheckMemory(train, test *Dataset, cfg Config, world, ranksOnNode int, avail int64) error {
	m, err := NewMLP(train.Features, cfg.Hidden, max(train.Classes, test.Classes))
	if err != nil {
		return err
	}
	need := MemoryNeed(m, train, test, cfg, world)
	if err := nodemem.Check("the model, a step and the data", need, ranksOnNode, avail); err != nil {
		sizes := make([]string, len(m.Sizes))
		for i, s := range m.Sizes {
			sizes[i] = strconv.Itoa(s)
		}
		return fmt.Errorf("not enough memory for MLP %s (%d parameters, %d rows a step): %w",
			strings.Join(sizes, "-"), m.NumParams(), stepRows(train.Rows(), world, cfg.BatchSize), err)
	}
	return nil
}
