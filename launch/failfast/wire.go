package failfast

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// The handshake, mutual, in the manner of the TCP collective's
// (trainer/collective/tcp/auth.go) but its own protocol, so that neither
// can be mistaken for the other. The dialer D is rank k's wrapper, the
// acceptor A the hub:
//
//	D → A  hello_D
//	A → D  hello_A, HMAC(token, labelA ‖ hello_D ‖ hello_A)
//	D → A  HMAC(token, labelD ‖ hello_D ‖ hello_A)
//	A → D  ok (one byte)
//
// D checks A's proof before giving its own, and counts as joined only on
// ok: a wrapper that cannot prove itself to the hub runs unwatched, it is
// never stopped for it. After ok both sides send msgLen-byte frames.
const (
	magic    = "bkff"
	version  = 1
	helloLen = 48
	macLen   = sha256.Size
	okByte   = 0x6b
	msgLen   = 9

	msgDone = 1 // D → A: my child exited 0
	msgFail = 2 // D → A: my child failed with status
	msgStop = 3 // A → D: rank r failed with status; stop

	handshakeTimeout = 10 * time.Second
)

var (
	labelAcceptor = []byte("batchkit failfast v1 acceptor")
	labelDialer   = []byte("batchkit failfast v1 dialer")
)

// hello is one side's opening message.
type hello struct {
	rank, size uint32
	nonce      [32]byte
}

func newHello(rank, size int) (hello, error) {
	h := hello{rank: uint32(rank), size: uint32(size)}
	if _, err := rand.Read(h.nonce[:]); err != nil {
		return h, fmt.Errorf("random nonce: %w", err)
	}
	return h, nil
}

func (h hello) marshal() []byte {
	b := make([]byte, helloLen)
	copy(b, magic)
	binary.LittleEndian.PutUint32(b[4:], version)
	binary.LittleEndian.PutUint32(b[8:], h.rank)
	binary.LittleEndian.PutUint32(b[12:], h.size)
	copy(b[16:], h.nonce[:])
	return b
}

// errNotPeer: the other side does not speak this protocol.
var errNotPeer = errors.New("not a batchkit fail-fast watcher of this version")

func parseHello(b []byte) (hello, error) {
	var h hello
	if string(b[:4]) != magic || binary.LittleEndian.Uint32(b[4:]) != version {
		return h, errNotPeer
	}
	h.rank = binary.LittleEndian.Uint32(b[8:])
	h.size = binary.LittleEndian.Uint32(b[12:])
	copy(h.nonce[:], b[16:])
	return h, nil
}

// mac is the proof of knowing token over parts (a label, then both hellos).
func mac(token string, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, []byte(token))
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// ErrRefused marks a handshake refused on its content (wrong token,
// another world), which retrying cannot fix, as opposed to one that broke
// off.
var ErrRefused = errors.New("refused")

func refusedf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, a...))
}

// dial is the dialer's side: nil once the hub has said ok.
func dial(c net.Conn, token string, rank, size int) error {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	me, err := newHello(rank, size)
	if err != nil {
		return err
	}
	hd := me.marshal()
	if _, err := c.Write(hd); err != nil {
		return err
	}
	in := make([]byte, helloLen+macLen)
	if _, err := io.ReadFull(c, in); err != nil {
		return err
	}
	ha := in[:helloLen]
	if _, err := parseHello(ha); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	if !hmac.Equal(in[helloLen:], mac(token, labelAcceptor, hd, ha)) {
		return refusedf("%s does not know this job's token", c.RemoteAddr())
	}
	if _, err := c.Write(mac(token, labelDialer, hd, ha)); err != nil {
		return err
	}
	var ok [1]byte
	if _, err := io.ReadFull(c, ok[:]); err != nil || ok[0] != okByte {
		return refusedf("rank 0 refused this rank (another job's world size or rank?)")
	}
	return nil
}

// accept is the hub's side: the dialer's rank once it has proven the token
// and fits a world of size (a rank from 1 to size-1).
func accept(c net.Conn, token string, size int) (int, error) {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	hd := make([]byte, helloLen)
	if _, err := io.ReadFull(c, hd); err != nil {
		return 0, err
	}
	them, err := parseHello(hd)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	me, err := newHello(0, size)
	if err != nil {
		return 0, err
	}
	ha := me.marshal()
	if _, err := c.Write(append(ha, mac(token, labelAcceptor, hd, ha)...)); err != nil {
		return 0, err
	}
	proof := make([]byte, macLen)
	if _, err := io.ReadFull(c, proof); err != nil {
		return 0, err
	}
	switch {
	case !hmac.Equal(proof, mac(token, labelDialer, hd, ha)):
		return 0, refusedf("bad job token")
	case int(them.size) != size || them.rank == 0 || int(them.rank) >= size:
		return 0, refusedf("rank %d of %d does not fit this world of %d", them.rank, them.size, size)
	}
	_, err = c.Write([]byte{okByte})
	return int(them.rank), err
}

// frame is one message after the handshake.
type frame struct {
	typ          byte
	rank, status int32
}

func writeFrame(c net.Conn, f frame) error {
	b := make([]byte, msgLen)
	b[0] = f.typ
	binary.LittleEndian.PutUint32(b[1:], uint32(f.rank))
	binary.LittleEndian.PutUint32(b[5:], uint32(f.status))
	_, err := c.Write(b)
	return err
}

func readFrame(c net.Conn) (frame, error) {
	b := make([]byte, msgLen)
	if _, err := io.ReadFull(c, b); err != nil {
		return frame{}, err
	}
	return frame{b[0], int32(binary.LittleEndian.Uint32(b[1:])), int32(binary.LittleEndian.Uint32(b[5:]))}, nil
}

// event is a received frame as the state machine's input; ok false for a
// frame this side does not expect.
func (f frame) event(from int, hub bool) (Event, bool) {
	switch {
	case hub && f.typ == msgDone:
		return Event{Kind: PeerDone, Rank: from}, true
	case hub && f.typ == msgFail:
		return Event{Kind: PeerFailed, Rank: from, Status: int(f.status)}, true
	case !hub && f.typ == msgStop:
		return Event{Kind: Stop, Rank: int(f.rank), Status: int(f.status)}, true
	}
	return Event{}, false
}
