package trainer

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The checkpoint file format, version 1, all integers little-endian:
//
//	"BKTRAIN\x00"                 magic, 8 bytes
//	uint32 version                1
//	uint32 n, then n bytes        the header, JSON (CheckpointHeader)
//	uint64 p                      number of parameters
//	p float32                     the parameters
//	p float32                     the optimizer's momentum buffer
//	32 bytes                      SHA-256 of everything before it
//
// The sampler's state is (seed, epoch, step in epoch): the permutation is a
// pure function of seed and epoch (Permutation), so no RNG state is stored.
const (
	checkpointMagic   = "BKTRAIN\x00"
	CheckpointVersion = 1
	// KeepCheckpoints is how many checkpoints Save leaves in the directory:
	// the newest, and two to fall back on should it be damaged.
	KeepCheckpoints = 3
)

// CheckpointHeader is a checkpoint's metadata.
type CheckpointHeader struct {
	Epoch       int     `json:"epoch"`         // the epoch under way (0-based)
	StepInEpoch int     `json:"step_in_epoch"` // steps of it done
	GlobalStep  int     `json:"global_step"`
	WorldSize   int     `json:"world_size"`
	Seed        uint64  `json:"seed"`
	BatchSize   int     `json:"batch_size"` // per rank
	LR          float32 `json:"lr"`
	Momentum    float32 `json:"momentum"`
	WeightDecay float32 `json:"weight_decay"`
	Epochs      int     `json:"epochs"`
	ModelSizes  []int   `json:"model_sizes"` // [features, hidden..., classes]
	TrainRows   int     `json:"train_rows"`
	Features    int     `json:"features"`
	Classes     int     `json:"classes"`
	// The epoch's running sums, so that a resumed epoch reports what an
	// uninterrupted one would.
	EpochLossSum float64 `json:"epoch_loss_sum"`
	EpochCorrect float64 `json:"epoch_correct"`
	EpochSamples float64 `json:"epoch_samples"`
}

// Checkpoint is the whole training state.
type Checkpoint struct {
	Header   CheckpointHeader
	Params   []float32
	Momentum []float32
}

// CorruptError is a checkpoint file that cannot be used: truncated,
// damaged (checksum), or not a checkpoint.
type CorruptError struct {
	File string
	Err  error
}

func (e *CorruptError) Error() string { return fmt.Sprintf("checkpoint %s: %v", e.File, e.Err) }
func (e *CorruptError) Unwrap() error { return e.Err }

// Encode is ck in the file format.
func (ck *Checkpoint) Encode() ([]byte, error) {
	if len(ck.Params) != len(ck.Momentum) {
		return nil, errors.New("checkpoint: parameters and momentum differ in length")
	}
	hdr, err := json.Marshal(ck.Header)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(checkpointMagic)+16+len(hdr)+8*len(ck.Params)+sha256.Size)
	b = append(b, checkpointMagic...)
	b = binary.LittleEndian.AppendUint32(b, CheckpointVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(hdr)))
	b = append(b, hdr...)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(ck.Params)))
	b = appendFloats(b, ck.Params)
	b = appendFloats(b, ck.Momentum)
	sum := sha256.Sum256(b)
	return append(b, sum[:]...), nil
}

func appendFloats(b []byte, fs []float32) []byte {
	for _, f := range fs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

// DecodeCheckpoint parses a checkpoint file's bytes; the error says what
// is wrong (the caller wraps it in a CorruptError with the path).
func DecodeCheckpoint(b []byte) (*Checkpoint, error) {
	if len(b) < len(checkpointMagic)+8+sha256.Size || string(b[:len(checkpointMagic)]) != checkpointMagic {
		return nil, errors.New("not a batchkit checkpoint (bad magic or truncated)")
	}
	body, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, errors.New("checksum mismatch (truncated or damaged)")
	}
	r := body[len(checkpointMagic):]
	if v := binary.LittleEndian.Uint32(r); v != CheckpointVersion {
		return nil, fmt.Errorf("format version %d, this batchkit reads %d", v, CheckpointVersion)
	}
	n := uint64(binary.LittleEndian.Uint32(r[4:]))
	r = r[8:]
	if n+8 > uint64(len(r)) {
		return nil, errors.New("header overruns the file")
	}
	ck := &Checkpoint{}
	dec := json.NewDecoder(bytes.NewReader(r[:n]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ck.Header); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	r = r[n:]
	p := binary.LittleEndian.Uint64(r)
	r = r[8:]
	if p > MaxParams || uint64(len(r)) != 8*p {
		return nil, fmt.Errorf("%d parameters do not match the %d bytes that follow", p, len(r))
	}
	ck.Params, ck.Momentum = readFloats(r[:4*p]), readFloats(r[4*p:])
	return ck, nil
}

func readFloats(b []byte) []float32 {
	fs := make([]float32, len(b)/4)
	for i := range fs {
		fs[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return fs
}

// checkpointName is the file of the checkpoint after step: names sort by step.
func checkpointName(step int) string { return fmt.Sprintf("ckpt-%010d.bkpt", step) }

// checkpointStep is the step a checkpoint file name carries, or -1.
func checkpointStep(name string) int {
	s, ok := strings.CutPrefix(name, "ckpt-")
	if s, ok2 := strings.CutSuffix(s, ".bkpt"); ok && ok2 {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			return n
		}
	}
	return -1
}

// SaveCheckpoint writes ck into dir (created if missing) atomically: a
// temporary file in dir, fsync, rename, fsync of dir, so that a crash leaves
// either the old set or the new file whole. Then it removes all but the
// newest KeepCheckpoints. It returns the file's path.
func SaveCheckpoint(dir string, ck *Checkpoint) (string, error) {
	b, err := ck.Encode()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, checkpointName(ck.Header.GlobalStep))
	if err := writeAtomic(path, b); err != nil {
		return "", err
	}
	return path, pruneCheckpoints(dir, KeepCheckpoints)
}

func writeAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".ckpt-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// listCheckpoints is dir's checkpoint files, newest (highest step) first;
// a missing dir has none.
func listCheckpoints(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() && checkpointStep(e.Name()) >= 0 {
			names = append(names, e.Name())
		}
	}
	slices.SortFunc(names, func(a, b string) int { return checkpointStep(b) - checkpointStep(a) })
	for i, n := range names {
		names[i] = filepath.Join(dir, n)
	}
	return names, nil
}

// pruneCheckpoints removes all but the newest keep checkpoints, and the
// temporary files of writes that a crash interrupted.
func pruneCheckpoints(dir string, keep int) error {
	names, err := listCheckpoints(dir)
	if err != nil {
		return err
	}
	for _, n := range names[min(keep, len(names)):] {
		if err := os.Remove(n); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	stale, _ := filepath.Glob(filepath.Join(dir, ".ckpt-*.tmp"))
	for _, s := range stale {
		os.Remove(s)
	}
	return nil
}

// LoadLatestCheckpoint reads the newest valid checkpoint in dir: a corrupt
// one is reported through warn (its path and why) and the one before it
// tried. No checkpoint at all is (nil, "", nil).
func LoadLatestCheckpoint(dir string, warn func(error)) (*Checkpoint, string, error) {
	names, err := listCheckpoints(dir)
	if err != nil {
		return nil, "", fmt.Errorf("checkpoint dir: %w", err)
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, "", fmt.Errorf("checkpoint: %w", err)
		}
		ck, err := DecodeCheckpoint(b)
		if err == nil {
			return ck, n, nil
		}
		warn(&CorruptError{File: n, Err: err})
	}
	return nil, "", nil
}
