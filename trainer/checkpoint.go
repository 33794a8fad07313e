package trainer

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/batchkit/batchkit/internal/outfile"
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
	for _, p := range [][]float32{ck.Params, ck.Momentum} {
		if slices.ContainsFunc(p, func(v float32) bool { return v-v != 0 }) {
			return nil, errors.New("checkpoint: the weights are not all finite numbers (a diverged run): not saved")
		}
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

// checkpointBytes is the size of a checkpoint of h and n parameters, give
// or take the header's digits (its values change as the run goes on).
func checkpointBytes(h CheckpointHeader, n int) int64 {
	hdr, _ := json.Marshal(h)
	return int64(len(checkpointMagic)+16+len(hdr)+256+sha256.Size) + 8*int64(n)
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
		return nil, errNotCheckpoint
	}
	body, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, errChecksum
	}
	h, off, p, err := checkpointLayout(body, int64(len(body)))
	if err != nil {
		return nil, err
	}
	r := body[off:]
	return &Checkpoint{Header: h, Params: readFloats(r[:4*p]), Momentum: readFloats(r[4*p:])}, nil
}

var (
	errNotCheckpoint = errors.New("not a batchkit checkpoint (bad magic or truncated)")
	errChecksum      = errors.New("checksum mismatch (truncated or damaged)")
)

// checkpointLayout checks what follows the magic of a checkpoint whose body
// (all but the checksum) is bodyLen bytes and starts with head, which holds
// at least the magic, version and header length: the version, the header,
// and that the parameters fill the rest. It returns the header, the offset
// of the parameters and their number.
func checkpointLayout(head []byte, bodyLen int64) (CheckpointHeader, int64, uint64, error) {
	var h CheckpointHeader
	r := head[len(checkpointMagic):]
	if v := binary.LittleEndian.Uint32(r); v != CheckpointVersion {
		return h, 0, 0, fmt.Errorf("format version %d, this batchkit reads %d", v, CheckpointVersion)
	}
	n := uint64(binary.LittleEndian.Uint32(r[4:]))
	r = r[8:]
	start := int64(len(checkpointMagic)) + 8 // of the header
	if n+8 > uint64(bodyLen-start) {
		return h, 0, 0, errors.New("header overruns the file")
	}
	if n+8 > uint64(len(r)) { // head stops short: only when streamed (verifyCheckpoint)
		return h, 0, 0, fmt.Errorf("header of %d bytes, more than a checkpoint's", n)
	}
	dec := json.NewDecoder(bytes.NewReader(r[:n]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return h, 0, 0, fmt.Errorf("header: %w", err)
	}
	p := binary.LittleEndian.Uint64(r[n:])
	off := start + int64(n) + 8
	if rest := bodyLen - off; p > MaxParams || uint64(rest) != 8*p {
		return h, 0, 0, fmt.Errorf("%d parameters do not match the %d bytes that follow", p, rest)
	}
	return h, off, p, nil
}

// verifyCheckpoint checks the checkpoint f, of size bytes, as
// DecodeCheckpoint would, reading it once in constant memory: pruning
// verifies files as large as the model without holding them.
func verifyCheckpoint(f io.Reader, size int64) error {
	if size < int64(len(checkpointMagic))+8+sha256.Size {
		return errNotCheckpoint
	}
	bodyLen := size - sha256.Size
	head := make([]byte, min(bodyLen, int64(len(checkpointMagic))+8+maxHeaderBytes+8))
	if _, err := io.ReadFull(f, head); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if string(head[:len(checkpointMagic)]) != checkpointMagic {
		return errNotCheckpoint
	}
	h := sha256.New()
	h.Write(head)
	if _, err := io.CopyN(h, f, bodyLen-int64(len(head))); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	sum := make([]byte, sha256.Size)
	if _, err := io.ReadFull(f, sum); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if !bytes.Equal(h.Sum(nil), sum) {
		return errChecksum
	}
	_, _, _, err := checkpointLayout(head, bodyLen)
	return err
}

func readFloats(b []byte) []float32 {
	fs := make([]float32, len(b)/4)
	for i := range fs {
		fs[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return fs
}

// Checkpoint file names: "ckpt-", the step in decimal, ".bkpt". Written
// zero-padded to 10 digits (checkpointName), so that they sort by step;
// read strictly (checkpointStep).
const (
	checkpointPrefix = "ckpt-"
	checkpointSuffix = ".bkpt"
	// maxStepDigits is the digits of math.MaxInt64: a longer name is not
	// a checkpoint's, however many of its digits are leading zeros.
	maxStepDigits = 19
	// maxHeaderBytes bounds a checkpoint's JSON header (a few hundred
	// bytes in practice) for the size check before a file is read.
	maxHeaderBytes = 1 << 20
	// maxCheckpointBytes is the largest file that can be a checkpoint:
	// a larger one is reported without being read.
	maxCheckpointBytes = int64(len(checkpointMagic)) + 8 + maxHeaderBytes + 8 + 8*MaxParams + sha256.Size
)

// checkpointName is the file of the checkpoint after step: names sort by step.
func checkpointName(step int) string { return fmt.Sprintf("ckpt-%010d.bkpt", step) }

// checkpointStep is the step a checkpoint file name carries, or -1. The name
// is "ckpt-", 1 to 19 ASCII digits whose value fits an int, ".bkpt", and
// nothing else: no sign (strconv.Atoi reads "+7000" as 7000), no space, no
// digits of other scripts, no overflow.
func checkpointStep(name string) int {
	s, ok := strings.CutPrefix(name, checkpointPrefix)
	if !ok {
		return -1
	}
	s, ok = strings.CutSuffix(s, checkpointSuffix)
	if !ok || len(s) == 0 || len(s) > maxStepDigits {
		return -1
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return -1
		}
	}
	n, err := strconv.ParseInt(s, 10, strconv.IntSize)
	if err != nil {
		return -1
	}
	return int(n)
}

// errMisnamed is the report of a file that looks like a checkpoint by name
// but is not one (ckpt-+7000.bkpt): never read, never removed.
var errMisnamed = fmt.Errorf("not a checkpoint name (%sDIGITS%s, at most %d digits)", checkpointPrefix, checkpointSuffix, maxStepDigits)

// SkippedError is a file in the checkpoint directory, named as a checkpoint,
// that a run can neither resume from nor count among the checkpoints it
// keeps: junk, a damaged checkpoint, one of another format version, a
// symbolic link (not followed), a directory or FIFO, a file it cannot read,
// a name that does not parse. It is never deleted (a checkpoint written
// later at the same step replaces it). Config.Warn gets one for each such
// file once a run.
type SkippedError struct {
	File string
	Err  error // why
}

func (e *SkippedError) Error() string {
	return fmt.Sprintf("checkpoint %s: %v: skipped, not deleted", e.File, e.Err)
}
func (e *SkippedError) Unwrap() error { return e.Err }

// checkpointFile is a directory entry with a checkpoint's name.
type checkpointFile struct {
	path string
	step int
	typ  fs.FileMode // the entry's type; a symbolic link is not followed
}

// scanCheckpoints is dir's entries named as checkpoints, highest step first
// (then by name), and the paths of those that look like one but whose name
// does not parse. A missing dir has none.
func scanCheckpoints(dir string) (files []checkpointFile, misnamed []string, err error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ents {
		name := e.Name()
		if step := checkpointStep(name); step >= 0 {
			files = append(files, checkpointFile{path: filepath.Join(dir, name), step: step, typ: e.Type()})
		} else if strings.HasPrefix(name, checkpointPrefix) && strings.HasSuffix(name, checkpointSuffix) {
			misnamed = append(misnamed, filepath.Join(dir, name))
		}
	}
	slices.SortFunc(files, func(a, b checkpointFile) int {
		return cmp.Or(cmp.Compare(b.step, a.step), strings.Compare(a.path, b.path))
	})
	return files, misnamed, nil
}

// fileID tells whether a file changed since it was last read.
type fileID struct {
	dev, ino    uint64
	size, mtime int64
}

func idOf(fi fs.FileInfo) fileID {
	id := fileID{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = uint64(st.Dev), uint64(st.Ino)
	}
	return id
}

// readCheckpointFile reads path, which must be a regular file: a symbolic
// link is not followed, a FIFO not waited on, a file larger than a
// checkpoint can be not read. With decode it returns the checkpoint; else
// it only verifies it (verifyCheckpoint) and returns nil.
func readCheckpointFile(path string, decode bool) (*Checkpoint, fileID, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fileID{}, symlinkError(path)
	}
	if err != nil {
		return nil, fileID{}, pathReason(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileID{}, pathReason(err)
	}
	id := idOf(fi)
	if !fi.Mode().IsRegular() {
		return nil, id, fmt.Errorf("%s, not a regular file", outfile.KindOf(fi.Mode()))
	}
	if fi.Size() > maxCheckpointBytes {
		return nil, id, fmt.Errorf("%d bytes, more than a checkpoint can be", fi.Size())
	}
	if !decode {
		return nil, id, pathReason(verifyCheckpoint(bufio.NewReaderSize(f, 1<<20), fi.Size()))
	}
	b, err := io.ReadAll(io.LimitReader(f, maxCheckpointBytes+1))
	if err != nil {
		return nil, id, pathReason(err)
	}
	ck, err := DecodeCheckpoint(b)
	return ck, id, err
}

// pathReason is err without the path a *fs.PathError repeats: the report
// names the file already.
func pathReason(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

func symlinkError(path string) error {
	if to, err := os.Readlink(path); err == nil {
		return fmt.Errorf("a symbolic link (to %s), not followed", to)
	}
	return errors.New("a symbolic link, not followed")
}

// checkpointDir is one run's checkpoint directory: which of its files the
// run has verified, which it has reported, and the lock it holds (nil for
// SaveCheckpoint and LoadLatestCheckpoint, which take none).
type checkpointDir struct {
	dir    string
	keep   int
	warn   func(error)
	lock   *DirLock
	seen   map[string]verdict // by path
	warned map[string]bool
}

// verdict is whether a file, as it was (id), decodes.
type verdict struct {
	id  fileID
	err error
}

func newCheckpointDir(dir string, warn func(error)) *checkpointDir {
	if warn == nil {
		warn = func(error) {}
	}
	return &checkpointDir{dir: dir, keep: KeepCheckpoints, warn: warn, seen: map[string]verdict{}, warned: map[string]bool{}}
}

// skip reports path once a run.
func (d *checkpointDir) skip(path string, why error) {
	if !d.warned[path] {
		d.warned[path] = true
		d.warn(&SkippedError{File: path, Err: why})
	}
}

// read decodes f (or with !decode only verifies it), a symbolic link or a
// file not regular being an error without opening it, and remembers
// whether it decoded.
func (d *checkpointDir) read(f checkpointFile, decode bool) (*Checkpoint, error) {
	switch {
	case f.typ&fs.ModeSymlink != 0:
		return nil, symlinkError(f.path)
	case !f.typ.IsRegular():
		return nil, fmt.Errorf("%s, not a regular file", outfile.KindOf(f.typ))
	}
	ck, id, err := readCheckpointFile(f.path, decode)
	d.seen[f.path] = verdict{id, err}
	return ck, err
}

// verify is whether f decodes, read again only if it changed since.
func (d *checkpointDir) verify(f checkpointFile) error {
	if v, ok := d.seen[f.path]; ok && f.typ.IsRegular() {
		if fi, err := os.Lstat(f.path); err == nil && idOf(fi) == v.id {
			return v.err
		}
	}
	_, err := d.read(f, false)
	return err
}

// loadLatest reads the newest checkpoint that decodes, reporting each file
// named as a newer one that does not. No checkpoint at all is (nil, "", nil).
func (d *checkpointDir) loadLatest() (*Checkpoint, string, error) {
	files, misnamed, err := scanCheckpoints(d.dir)
	if err != nil {
		return nil, "", fmt.Errorf("checkpoint dir: %w", err)
	}
	for _, m := range misnamed {
		d.skip(m, errMisnamed)
	}
	for _, f := range files {
		ck, err := d.read(f, true)
		if err == nil {
			return ck, f.path, nil
		}
		d.skip(f.path, err)
	}
	return nil, "", nil
}

// save writes ck atomically (writeAtomic), then prunes: it returns the
// path, which pruning never removes. With a lock, it first checks that the
// lock is still this run's.
func (d *checkpointDir) save(ck *Checkpoint) (string, error) {
	b, err := ck.Encode()
	if err != nil {
		return "", err
	}
	if d.lock != nil {
		if err := d.lock.check(); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(d.dir, checkpointName(ck.Header.GlobalStep))
	if err := writeAtomic(path, b); err != nil {
		return "", err
	}
	if fi, err := os.Lstat(path); err == nil {
		d.seen[path] = verdict{id: idOf(fi)}
	}
	delete(d.warned, path) // a damaged file of that name was replaced
	return path, d.prune(path)
}

// prune removes the checkpoints older than the newest d.keep that decode,
// except written (the one just written). A file that does not decode never
// counts among those kept, and is never removed: it is reported once.
func (d *checkpointDir) prune(written string) error {
	files, misnamed, err := scanCheckpoints(d.dir)
	if err != nil {
		return err
	}
	for _, m := range misnamed {
		d.skip(m, errMisnamed)
	}
	kept := 0
	for _, f := range files {
		if err := d.verify(f); err != nil {
			d.skip(f.path, err)
			continue
		}
		if kept < d.keep || f.path == written {
			kept++
			continue
		}
		if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		delete(d.seen, f.path)
	}
	return nil
}

// SaveCheckpoint writes ck into dir (created if missing) atomically: a
// temporary file in dir of a name no other process uses, fsync, rename,
// fsync of dir, so that a crash leaves either the old set or the new file
// whole. Then it removes all but the newest KeepCheckpoints that decode;
// files named as checkpoints that do not decode are neither counted nor
// removed. It returns the file's path. It takes no lock: Train does
// (LockCheckpointDir).
func SaveCheckpoint(dir string, ck *Checkpoint) (string, error) {
	return newCheckpointDir(dir, nil).save(ck)
}

// LoadLatestCheckpoint reads the newest checkpoint in dir that decodes.
// Every file named as a newer one that does not (damaged, another format
// version, a symbolic link, not a regular file, unreadable), and every name
// of the pattern that does not parse, is reported through warn as a
// *SkippedError. No checkpoint at all is (nil, "", nil).
func LoadLatestCheckpoint(dir string, warn func(error)) (*Checkpoint, string, error) {
	return newCheckpointDir(dir, warn).loadLatest()
}

// tempPrefix starts the names of this process's temporary files:
// ".ckpt-tmp.HOST.PID.", HOST reduced to letters, digits, '-' and '_'.
// Nothing but this process creates or removes files of that prefix while it
// runs; a dead run's are removed by the next one to lock the directory
// (sweepTemps).
var tempPrefix = sync.OnceValue(func() string {
	return fmt.Sprintf("%s%s.%d.", tempMark, tempHost(hostname()), os.Getpid())
})

// tempMark starts every checkpoint temporary file name of this version.
const tempMark = ".ckpt-tmp."

// tempHost is host as it appears in a temporary file name.
func tempHost(host string) string {
	b := []byte(host)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b[:min(len(b), 64)])
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown"
	}
	return h
}

// writeAtomic writes b to path through a temporary file of this process's
// own, removed again whatever fails.
func writeAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	var (
		tmp *os.File
		err error
	)
	for range 10 {
		tmp, err = os.OpenFile(filepath.Join(dir, fmt.Sprintf("%s%016x", tempPrefix(), rand.Uint64())), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	renamed := false
	defer func() {
		if !renamed {
			os.Remove(tmp.Name())
		}
	}()
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
		if fi, serr := os.Lstat(path); err != nil && serr == nil && fi.IsDir() {
			return fmt.Errorf("writing checkpoint %s: a directory of that name is in the way: remove it", path)
		}
		renamed = err == nil
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
