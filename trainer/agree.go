package trainer

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Before anything else the ranks compare what they were given: each
// rank's settings and a fingerprint of its data go to every rank (two
// Allgathers), and every rank names the same differences. Ranks that
// disagree would otherwise train on different data without a word, fail
// at some step with a generic message, or report "weights differ".

// setting is one thing every rank must have the same of, named as batchkit
// train's flag.
type setting struct{ name, value string }

// settings are what rank's cfg and data say. --checkpoint-every is not
// among them: only rank 0 writes.
func settings(cfg Config, train, test *Dataset) []setting {
	hidden := make([]string, len(cfg.Hidden))
	for i, h := range cfg.Hidden {
		hidden[i] = strconv.Itoa(h)
	}
	f32 := func(v float32) string { return strconv.FormatFloat(float64(v), 'g', -1, 32) }
	return []setting{
		{"--hidden", flagValue(strings.Join(hidden, ","))},
		{"--epochs", strconv.Itoa(cfg.Epochs)},
		{"--batch-size", strconv.Itoa(cfg.BatchSize)},
		{"--lr", f32(cfg.LR)},
		{"--momentum", f32(cfg.Momentum)},
		{"--weight-decay", f32(cfg.WeightDecay)},
		{"--seed", strconv.FormatUint(cfg.Seed, 10)},
		{"--check-every", strconv.Itoa(cfg.CheckEvery)},
		{"--checkpoint-dir", flagValue(cfg.CheckpointDir)},
		{"--data", dataFingerprint(train, test)},
	}
}

// flagValue is v as a shell would show it to be one word: "" quoted, and
// anything with blanks, quotes or control characters (one line each,
// encodeSettings needs).
func flagValue(v string) string {
	if v == "" || strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == '"' || r == '\'' || r == '\\' || !strconv.IsPrint(r) }) {
		return strconv.Quote(v)
	}
	return v
}

// dataFingerprint names a data set by its shape and the SHA-256 of its
// values (train then test, features then labels), 12 hex digits of it.
func dataFingerprint(train, test *Dataset) string {
	h := sha256.New()
	buf := make([]byte, 0, 1<<16)
	for _, d := range []*Dataset{train, test} {
		for i, v := range d.X {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			if len(buf) == cap(buf) || i == len(d.X)-1 {
				h.Write(buf)
				buf = buf[:0]
			}
		}
		for i, y := range d.Y {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(y))
			if len(buf) == cap(buf) || i == len(d.Y)-1 {
				h.Write(buf)
				buf = buf[:0]
			}
		}
	}
	return fmt.Sprintf("%d train / %d test rows × %d features, %d classes, sha256 %s",
		train.Rows(), test.Rows(), train.Features, max(train.Classes, test.Classes), hex.EncodeToString(h.Sum(nil))[:12])
}

// Disagreement is a setting in which a rank differs from rank 0.
type Disagreement struct {
	Rank         int
	Setting      string // the flag: "--hidden", "--data" ...
	Value, Rank0 string
}

func (d Disagreement) String() string {
	return fmt.Sprintf("rank %d: %s %s (rank 0: %s)", d.Rank, d.Setting, d.Value, d.Rank0)
}

// DisagreeError is ranks that were given different settings or data: the
// run is refused before its first step, on every rank. Rank is the rank
// that returns it: rank 0 names every difference (up to maxNamed), the
// others their own.
type DisagreeError struct {
	Rank  int
	Diffs []Disagreement
}

const maxNamed = 8

func (e *DisagreeError) Error() string {
	diffs := e.Diffs
	if e.Rank != 0 {
		diffs = nil
		for _, d := range e.Diffs {
			if d.Rank == e.Rank {
				diffs = append(diffs, d)
			}
		}
		if diffs == nil {
			return "the ranks were given different settings or data (rank 0 names them): every rank must run the same train command on the same data"
		}
	}
	s := make([]string, 0, min(len(diffs), maxNamed))
	for _, d := range diffs[:min(len(diffs), maxNamed)] {
		s = append(s, d.String())
	}
	more := ""
	if len(diffs) > maxNamed {
		more = fmt.Sprintf("; and %d more", len(diffs)-maxNamed)
	}
	return fmt.Sprintf("the ranks were given different settings or data: %s%s", strings.Join(s, "; "), more)
}

// agree compares every rank's settings with rank 0's: a *DisagreeError
// on every rank when any differ. A world of one has nobody to disagree.
func agree(c Comm, cfg Config, train, test *Dataset) error {
	if c.Size() < 2 {
		return nil
	}
	mine := settings(cfg, train, test)
	all, err := gatherBytes(c, encodeSettings(mine))
	if err != nil {
		return fmt.Errorf("start-up: comparing the ranks' settings: %w", err)
	}
	rank0 := decodeSettings(all[0])
	var diffs []Disagreement
	for r := 1; r < len(all); r++ {
		theirs := decodeSettings(all[r])
		for i, s := range rank0 {
			if i >= len(theirs) || theirs[i] != s {
				v := "(none)"
				if i < len(theirs) {
					v = theirs[i].value
				}
				diffs = append(diffs, Disagreement{Rank: r, Setting: s.name, Value: v, Rank0: s.value})
			}
		}
	}
	if diffs != nil {
		return &DisagreeError{Rank: c.Rank(), Diffs: diffs}
	}
	return nil
}

// encodeSettings is one "name value" line a setting; no value holds a
// line break (the strings are quoted).
func encodeSettings(ss []setting) []byte {
	var b []byte
	for _, s := range ss {
		b = fmt.Appendf(b, "%s %s\n", s.name, s.value)
	}
	return b
}

func decodeSettings(b []byte) []setting {
	var ss []setting
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		name, value, _ := strings.Cut(line, " ")
		ss = append(ss, setting{name, value})
	}
	return ss
}

// gatherBytes gives every rank every rank's b, through the Comm's
// Allgather of float64s: the lengths first, then the bytes, 4 to a
// float64 (exact).
func gatherBytes(c Comm, b []byte) ([][]byte, error) {
	n := c.Size()
	lens := make([]float64, n)
	if err := c.Allgather([]float64{float64(len(b))}, lens); err != nil {
		return nil, err
	}
	most := 0
	for _, l := range lens {
		most = max(most, int(l))
	}
	words := (most + 3) / 4
	send, recv := make([]float64, words), make([]float64, n*words)
	padded := append(b, make([]byte, 4*words-len(b))...)
	for i := range send {
		send[i] = float64(binary.LittleEndian.Uint32(padded[4*i:]))
	}
	if err := c.Allgather(send, recv); err != nil {
		return nil, err
	}
	out := make([][]byte, n)
	for r := range n {
		raw := make([]byte, 4*words)
		for i := range words {
			binary.LittleEndian.PutUint32(raw[4*i:], uint32(recv[r*words+i]))
		}
		out[r] = raw[:int(lens[r])]
	}
	return out, nil
}
