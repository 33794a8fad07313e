package rendezvous

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
	"unsafe"

	"github.com/batchkit/batchkit/envvars"
	"github.com/batchkit/batchkit/internal/jobauth"
)

// The handshake every connection (rendezvous and mesh) starts with is
// internal/jobauth's, as this protocol: the hello's fields say the version,
// byte order, purpose, world size and rank, so that both MACs cover them,
// and the acceptor's verdict is a framed message, accept or abort(reason)
// (see tcpMsg*). Its magic and labels are this protocol's alone.

const (
	tcpVersion      = 1
	purposeRendezv  = 1
	purposeMesh     = 2
	purposeStar     = 3 // the rendezvous of a backend whose data moves elsewhere (star.go)
	byteOrderLittle = 1
	byteOrderBig    = 2

	handshakeTimeout = jobauth.Timeout
)

var collectiveAuth = &jobauth.Protocol{
	Magic:     "bkcl",
	Label:     "batchkit collective v1",
	NotPeer:   errNotPeer,
	Version:   checkVersion,
	TokenHint: ": job tokens differ (every rank must get the same " + envvars.Token + ")",
}

// nativeByteOrder is the layout the raw float bytes travel in: all ranks
// must agree, since collectives send memory as is.
var nativeByteOrder = func() uint8 {
	x := uint16(1)
	if *(*byte)(unsafe.Pointer(&x)) == 1 {
		return byteOrderLittle
	}
	return byteOrderBig
}()

func byteOrderName(b uint8) string {
	switch b {
	case byteOrderLittle:
		return "little-endian"
	case byteOrderBig:
		return "big-endian"
	}
	return fmt.Sprintf("byte order %d", b)
}

// hello is what one side says of itself: its hello's fields.
type hello struct {
	version   uint16
	byteOrder uint8
	purpose   uint8
	size      uint32
	rank      uint32
}

const helloFieldsLen = 12

func newHello(rank, size int, purpose uint8) hello {
	return hello{version: tcpVersion, byteOrder: nativeByteOrder, purpose: purpose, size: uint32(size), rank: uint32(rank)}
}

func (h hello) fields() []byte {
	b := make([]byte, helloFieldsLen)
	binary.LittleEndian.PutUint16(b[0:], h.version)
	b[2] = h.byteOrder
	b[3] = h.purpose
	binary.LittleEndian.PutUint32(b[4:], h.size)
	binary.LittleEndian.PutUint32(b[8:], h.rank)
	return b
}

// parseHello reads fields of helloFieldsLen bytes (jobauth hands on the
// peer's fields at the length of this side's).
func parseHello(b []byte) hello {
	return hello{version: binary.LittleEndian.Uint16(b[0:]), byteOrder: b[2], purpose: b[3],
		size: binary.LittleEndian.Uint32(b[4:]), rank: binary.LittleEndian.Uint32(b[8:])}
}

// errNotPeer: the bytes are not a batchkit hello at all.
var errNotPeer = errors.New("not a batchkit collective peer")

func checkVersion(fields []byte) error {
	if v := parseHello(fields).version; v != tcpVersion {
		return fmt.Errorf("collective protocol v%d, this process v%d: all ranks must run the same batchkit version", v, tcpVersion)
	}
	return nil
}

// authError is a failed handshake that retrying cannot fix (wrong token,
// mismatched version, refused by the acceptor, an address that cannot work).
type authError = jobauth.RefusedError

// handshakeIOError is a handshake that broke off, as opposed to one that
// was refused on its content.
type handshakeIOError = jobauth.IOError

func fatalf(format string, a ...any) error { return jobauth.Refusedf(format, a...) }

// dialHandshake runs the dialer's side on c. want is the acceptor's expected
// rank. extra (may be nil) is sent right after the dialer's proof, before
// the acceptor's verdict, to save a round trip. It returns nil once the
// acceptor has accepted.
func dialHandshake(c net.Conn, o *Options, purpose uint8, want int, extra []byte, deadline time.Time) error {
	verdict := func(c net.Conn, fields []byte) error {
		// Authenticated both ways once the acceptor has our proof; from
		// here on a mismatch is a misconfigured job. The proof went first
		// so that the acceptor sees the mismatch too (and rank 0 fails the
		// rendezvous at once, naming it) rather than a dropped handshake.
		them := parseHello(fields)
		if err := checkAcceptor(&them, o, purpose, want, c.RemoteAddr()); err != nil {
			return err
		}
		return awaitAccept(c, want)
	}
	d := jobauth.Dialer{Token: o.Token, Fields: newHello(o.Rank, o.Size, purpose).fields(), Extra: extra, Verdict: verdict}
	return collectiveAuth.Dial(c, d, deadline)
}

// checkAcceptor is the dialer's verdict on an authenticated acceptor's
// hello: nil when it is the rank wanted, in this world.
func checkAcceptor(them *hello, o *Options, purpose uint8, want int, addr net.Addr) error {
	switch {
	case them.byteOrder != nativeByteOrder:
		return fatalf("rank %d is %s, this rank %s: mixed byte orders are not supported",
			them.rank, byteOrderName(them.byteOrder), byteOrderName(nativeByteOrder))
	case int(them.size) != o.Size:
		return fatalf("world size mismatch: rank %d at %s has %d ranks, rank %d has %d", them.rank, addr, them.size, o.Rank, o.Size)
	case isRendezvous(them.purpose) && isRendezvous(purpose) && them.purpose != purpose:
		// Rank 0 runs another backend: it has our hello and name, and its
		// refusal names both backends (checkBackend).
		return nil
	case int(them.rank) != want || them.purpose != purpose:
		return fatalf("%s is rank %d (purpose %d), expected rank %d (purpose %d)", addr, them.rank, them.purpose, want, purpose)
	}
	return nil
}

// awaitAccept reads the acceptor's verdict on this dialer.
func awaitAccept(c net.Conn, want int) error {
	typ, body, err := ReadMsg(c, 1<<16)
	if err != nil {
		return fmt.Errorf("waiting for rank %d to accept: %w", want, err)
	}
	switch typ {
	case tcpMsgAccept:
		return nil
	case tcpMsgAbort:
		return fatalf("rank %d refused this rank: %s", want, body)
	}
	return fatalf("rank %d sent message type %d during the handshake", want, typ)
}

// peerHello is what an acceptor learned from an authenticated dialer.
type peerHello struct {
	hello
	conn  *net.TCPConn
	extra []byte
}

// acceptHandshake runs the acceptor's side on c, up to and including the
// dialer's proof and its extra bytes (extraLen of them). The caller then
// decides and sends accept or abort. Errors are ready to log after
// "refused connection from ADDR: ".
func acceptHandshake(c *net.TCPConn, o *Options, purpose uint8, extraLen int, deadline time.Time) (*peerHello, error) {
	fields, extra, err := collectiveAuth.Accept(c, o.Token, newHello(o.Rank, o.Size, purpose).fields(), extraLen, deadline)
	if err != nil {
		return nil, err
	}
	return &peerHello{hello: parseHello(fields), conn: c, extra: extra}, nil
}

func isRendezvous(p uint8) bool { return p == purposeRendezv || p == purposeStar }

// checkBackend is rank 0's verdict on a joining rank's backend: "" when it
// is rank 0's own.
func checkBackend(p *peerHello, o *Options) string {
	theirs, ours := nameOf(p.extra), o.backendName()
	if isRendezvous(p.purpose) && (p.purpose != o.purpose() || theirs != ours) {
		return fmt.Sprintf("rank %d uses the %s backend, rank 0 the %s backend: every rank must be given the same --backend", p.rank, theirs, ours)
	}
	return ""
}

// checkPeer is the acceptor's verdict on an authenticated dialer's hello:
// "" when it fits this world.
func checkPeer(h *hello, o *Options, purpose uint8) string {
	switch {
	case h.byteOrder != nativeByteOrder:
		return fmt.Sprintf("rank %d is %s, rank %d %s: mixed byte orders are not supported",
			h.rank, byteOrderName(h.byteOrder), o.Rank, byteOrderName(nativeByteOrder))
	case int(h.size) != o.Size:
		return fmt.Sprintf("world size mismatch: rank %d has %d ranks, rank %d has %d", o.Rank, o.Size, h.rank, h.size)
	case h.purpose != purpose:
		return fmt.Sprintf("rank %d connected for purpose %d, expected %d", h.rank, h.purpose, purpose)
	case int(h.rank) >= o.Size || h.rank == 0:
		return fmt.Sprintf("rank %d out of range for a world of %d", h.rank, o.Size)
	}
	return ""
}

// Framed messages after the handshake: type byte, uint32 length, body.
const (
	tcpMsgAccept = 1 + iota
	tcpMsgAbort  // body: reason
	tcpMsgTable  // rank 0 → all: every rank's mesh address
	tcpMsgMeshOK // rank k → rank 0: my mesh links are up
	tcpMsgReady  // rank 0 → all: everyone's are
)

func WriteMsg(c net.Conn, typ byte, body []byte) error {
	b := make([]byte, 5+len(body))
	b[0] = typ
	binary.LittleEndian.PutUint32(b[1:], uint32(len(body)))
	copy(b[5:], body)
	_, err := c.Write(b)
	return err
}

func ReadMsg(c net.Conn, max int) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.LittleEndian.Uint32(h[1:])
	if int64(n) > int64(max) {
		return 0, nil, fmt.Errorf("message of %d bytes, at most %d expected", n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		return 0, nil, err
	}
	return h[0], b, nil
}

// TestHello is the hello a dialer claiming rank of a world of size opens
// with, at rank 0's port (mesh false) or at a mesh listener: for package
// tcp's tests, whose rogue dialers follow it with a made-up proof.
func TestHello(rank, size int, mesh bool) ([]byte, error) {
	purpose := uint8(purposeRendezv)
	if mesh {
		purpose = purposeMesh
	}
	return collectiveAuth.Hello(newHello(rank, size, purpose).fields())
}
