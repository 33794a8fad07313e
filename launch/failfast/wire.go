package failfast

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/batchkit/batchkit/internal/jobauth"
)

// The handshake is internal/jobauth's, as this protocol, with its own magic
// and labels so that it cannot be mistaken for the TCP collective's. The
// dialer is rank k's wrapper, the acceptor the hub; the hello's fields are
// the version, rank and world size, and the hub's verdict is one ok byte.
// The dialer counts as joined only on ok: a wrapper that cannot prove
// itself to the hub runs unwatched, it is never stopped for it. After ok
// both sides send msgLen-byte frames.
const (
	version = 1
	okByte  = 0x6b
	msgLen  = 9

	msgDone = 1 // D → A: my child exited 0
	msgFail = 2 // D → A: my child failed with status
	msgStop = 3 // A → D: rank r failed with status; stop

	handshakeTimeout = jobauth.Timeout
)

var watchAuth = &jobauth.Protocol{
	Magic:   "bkff",
	Label:   "batchkit failfast v1",
	NotPeer: errNotPeer,
	Version: checkVersion,
}

// helloFields is what one side says of itself.
func helloFields(rank, size int) []byte {
	b := make([]byte, 12)
	binary.LittleEndian.PutUint32(b[0:], version)
	binary.LittleEndian.PutUint32(b[4:], uint32(rank))
	binary.LittleEndian.PutUint32(b[8:], uint32(size))
	return b
}

// errNotPeer: the other side does not speak this protocol.
var errNotPeer = errors.New("not a batchkit fail-fast watcher")

func checkVersion(fields []byte) error {
	if v := binary.LittleEndian.Uint32(fields); v != version {
		return fmt.Errorf("fail-fast protocol v%d, this process v%d", v, version)
	}
	return nil
}

// ErrRefused marks a handshake refused on its content (wrong token,
// another world), which retrying cannot fix, as opposed to one that broke
// off.
var ErrRefused = errors.New("refused")

// refusal marks a refused handshake's error with ErrRefused.
func refusal(err error) error {
	if _, ok := errors.AsType[*jobauth.RefusedError](err); ok {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return err
}

// dial is the dialer's side: nil once the hub has said ok.
func dial(c net.Conn, token string, rank, size int) error {
	d := jobauth.Dialer{Token: token, Fields: helloFields(rank, size), Verdict: awaitOK}
	return refusal(watchAuth.Dial(c, d, time.Now().Add(handshakeTimeout)))
}

// awaitOK reads the hub's verdict: a hub closes instead of saying no.
func awaitOK(c net.Conn, _ []byte) error {
	var ok [1]byte
	if _, err := io.ReadFull(c, ok[:]); err != nil || ok[0] != okByte {
		return jobauth.Refusedf("rank 0 refused this rank (another job's world size or rank?)")
	}
	return nil
}

// accept is the hub's side: the dialer's rank once it has proven the token
// and fits a world of size (a rank from 1 to size-1).
func accept(c net.Conn, token string, size int) (int, error) {
	deadline := time.Now().Add(handshakeTimeout)
	fields, _, err := watchAuth.Accept(c, token, helloFields(0, size), 0, deadline)
	if err != nil {
		return 0, refusal(err)
	}
	rank, n := binary.LittleEndian.Uint32(fields[4:]), binary.LittleEndian.Uint32(fields[8:])
	if int(n) != size || rank == 0 || int(rank) >= size {
		return 0, refusal(jobauth.Refusedf("rank %d of %d does not fit this world of %d", rank, n, size))
	}
	c.SetWriteDeadline(deadline)
	defer c.SetWriteDeadline(time.Time{})
	_, err = c.Write([]byte{okByte})
	return int(rank), err
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
