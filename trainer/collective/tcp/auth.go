package tcp

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
	"unsafe"

	"github.com/batchkit/batchkit/envsetup/envvars"
)

// The handshake every connection (rendezvous and mesh) starts with. The
// dialer D and the acceptor A each send a hello with a fresh nonce, then each
// proves it knows the job token with an HMAC over both hellos (so over both
// nonces, both ranks, the world size and the purpose) under its own label:
//
//	D → A  hello_D
//	A → D  hello_A, HMAC(token, "…acceptor" ‖ hello_D ‖ hello_A)
//	D → A  HMAC(token, "…dialer" ‖ hello_D ‖ hello_A)
//	A → D  accept | abort(reason)          (a framed message, see tcpMsg*)
//
// The token never crosses the wire, fresh nonces defeat replay, and the
// distinct labels stop a reflected MAC from passing as the other side's. D
// checks A's proof before proving anything itself, so a rank with a wrong
// token learns so at once instead of timing out.

const (
	tcpMagic        = "bkcl"
	tcpVersion      = 1
	tcpHelloLen     = 48
	tcpMACLen       = sha256.Size
	tcpNonceLen     = 32
	purposeRendezv  = 1
	purposeMesh     = 2
	byteOrderLittle = 1
	byteOrderBig    = 2

	// handshakeTimeout bounds one handshake, so a silent or slow connector
	// (a port scanner, a stuck process) cannot hold a listener's attention.
	handshakeTimeout = 10 * time.Second
)

var (
	labelAcceptor = []byte("batchkit collective v1 acceptor")
	labelDialer   = []byte("batchkit collective v1 dialer")
)

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

// hello is one side's opening message.
type hello struct {
	version   uint16
	byteOrder uint8
	purpose   uint8
	size      uint32
	rank      uint32
	nonce     [tcpNonceLen]byte
}

func (h *hello) marshal(b []byte) {
	copy(b[0:4], tcpMagic)
	binary.LittleEndian.PutUint16(b[4:], h.version)
	b[6] = h.byteOrder
	b[7] = h.purpose
	binary.LittleEndian.PutUint32(b[8:], h.size)
	binary.LittleEndian.PutUint32(b[12:], h.rank)
	copy(b[16:48], h.nonce[:])
}

// errNotPeer: the bytes are not a batchkit hello at all.
var errNotPeer = errors.New("not a batchkit collective peer")

func (h *hello) unmarshal(b []byte) error {
	if string(b[0:4]) != tcpMagic {
		return errNotPeer
	}
	h.version = binary.LittleEndian.Uint16(b[4:])
	h.byteOrder = b[6]
	h.purpose = b[7]
	h.size = binary.LittleEndian.Uint32(b[8:])
	h.rank = binary.LittleEndian.Uint32(b[12:])
	copy(h.nonce[:], b[16:48])
	return nil
}

func newHello(rank, size int, purpose uint8) (hello, error) {
	h := hello{version: tcpVersion, byteOrder: nativeByteOrder, purpose: purpose, size: uint32(size), rank: uint32(rank)}
	if _, err := rand.Read(h.nonce[:]); err != nil {
		return h, fmt.Errorf("random nonce: %w", err)
	}
	return h, nil
}

func handshakeMAC(token string, label, helloD, helloA []byte) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write(label)
	m.Write(helloD)
	m.Write(helloA)
	return m.Sum(nil)
}

// authError is a failed handshake that retrying cannot fix (wrong token,
// mismatched version, refused by the acceptor).
type authError struct{ err error }

func (e *authError) Error() string { return e.err.Error() }
func (e *authError) Unwrap() error { return e.err }

func fatalf(format string, args ...any) error { return &authError{fmt.Errorf(format, args...)} }

// dialHandshake runs the dialer's side on c. want is the acceptor's expected
// rank. extra (may be nil) is sent right after the dialer's proof, before
// the acceptor's verdict, to save a round trip. It returns nil once the
// acceptor has accepted.
func dialHandshake(c net.Conn, o *Options, purpose uint8, want int, extra []byte, deadline time.Time) error {
	c.SetDeadline(deadline)
	defer c.SetDeadline(time.Time{})
	var buf [tcpHelloLen + tcpHelloLen + tcpMACLen]byte
	hd, ha, mac := buf[:tcpHelloLen], buf[tcpHelloLen:2*tcpHelloLen], buf[2*tcpHelloLen:]
	them, err := exchangeHellos(c, o, purpose, buf[:])
	if err != nil {
		return err
	}
	if !hmac.Equal(mac, handshakeMAC(o.Token, labelAcceptor, hd, ha)) {
		// Answer with a dummy, so that the acceptor logs a bad token rather
		// than a dropped handshake. Never a real proof to an acceptor that
		// has not proven itself: it could relay it.
		var dummy [tcpMACLen]byte
		rand.Read(dummy[:])
		c.Write(dummy[:])
		return fatalf("%s (rank %d) does not know this job's token: job tokens differ (every rank must get the same %s)",
			c.RemoteAddr(), them.rank, envvars.Token)
	}
	// Authenticated both ways once the acceptor has our proof; from here on
	// a mismatch is a misconfigured job. The proof goes first so that the
	// acceptor sees the mismatch too (and rank 0 fails the rendezvous at
	// once, naming it) rather than a dropped handshake.
	if _, err := c.Write(append(handshakeMAC(o.Token, labelDialer, hd, ha), extra...)); err != nil {
		return err
	}
	if err := checkAcceptor(&them, o, purpose, want, c.RemoteAddr()); err != nil {
		return err
	}
	return awaitAccept(c, want)
}

// exchangeHellos sends the dialer's hello into buf's first part and reads
// the acceptor's hello and proof into the rest: the acceptor's hello when
// it is a batchkit peer speaking this version.
func exchangeHellos(c net.Conn, o *Options, purpose uint8, buf []byte) (hello, error) {
	var them hello
	me, err := newHello(o.Rank, o.Size, purpose)
	if err != nil {
		return them, err
	}
	me.marshal(buf[:tcpHelloLen])
	if _, err := c.Write(buf[:tcpHelloLen]); err != nil {
		return them, err
	}
	if _, err := io.ReadFull(c, buf[tcpHelloLen:]); err != nil {
		return them, err
	}
	if err := them.unmarshal(buf[tcpHelloLen : 2*tcpHelloLen]); err != nil {
		return them, fatalf("%s answered, but it is %w (is MASTER_PORT used by another service?)", c.RemoteAddr(), err)
	}
	if them.version != tcpVersion {
		return them, fatalf("%s speaks collective protocol v%d, this process v%d: all ranks must run the same batchkit version",
			c.RemoteAddr(), them.version, tcpVersion)
	}
	return them, nil
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
	case int(them.rank) != want || them.purpose != purpose:
		return fatalf("%s is rank %d (purpose %d), expected rank %d (purpose %d)", addr, them.rank, them.purpose, want, purpose)
	}
	return nil
}

// awaitAccept reads the acceptor's verdict on this dialer.
func awaitAccept(c net.Conn, want int) error {
	typ, body, err := readMsg(c, 1<<16)
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
	c.SetDeadline(deadline)
	var buf [tcpHelloLen + tcpHelloLen + tcpMACLen]byte
	hd, ha, mac := buf[:tcpHelloLen], buf[tcpHelloLen:2*tcpHelloLen], buf[2*tcpHelloLen:]
	if _, err := io.ReadFull(c, hd); err != nil {
		return nil, ioFailure(err)
	}
	var them hello
	if err := them.unmarshal(hd); err != nil {
		return nil, err
	}
	me, err := newHello(o.Rank, o.Size, purpose)
	if err != nil {
		return nil, err
	}
	me.marshal(ha)
	copy(mac, handshakeMAC(o.Token, labelAcceptor, hd, ha))
	if _, err := c.Write(buf[tcpHelloLen:]); err != nil {
		return nil, ioFailure(err)
	}
	if them.version != tcpVersion {
		return nil, fmt.Errorf("collective protocol v%d, this rank speaks v%d", them.version, tcpVersion)
	}
	in := make([]byte, tcpMACLen+extraLen)
	if _, err := io.ReadFull(c, in[:tcpMACLen]); err != nil {
		return nil, ioFailure(err)
	}
	if !hmac.Equal(in[:tcpMACLen], handshakeMAC(o.Token, labelDialer, hd, ha)) {
		return nil, errors.New("bad job token")
	}
	if _, err := io.ReadFull(c, in[tcpMACLen:]); err != nil {
		return nil, ioFailure(err)
	}
	c.SetDeadline(time.Time{})
	return &peerHello{hello: them, conn: c, extra: in[tcpMACLen:]}, nil
}

// handshakeIOError is a handshake that broke off, as opposed to one that
// was refused on its content.
type handshakeIOError struct{ err error }

func (e *handshakeIOError) Error() string { return e.err.Error() }
func (e *handshakeIOError) Unwrap() error { return e.err }

func ioFailure(err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		err = errors.New("closed during the handshake")
	case errors.As(err, &ne) && ne.Timeout():
		err = errors.New("no handshake in time")
	default:
		err = fmt.Errorf("handshake: %w", err)
	}
	return &handshakeIOError{err}
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

func writeMsg(c net.Conn, typ byte, body []byte) error {
	b := make([]byte, 5+len(body))
	b[0] = typ
	binary.LittleEndian.PutUint32(b[1:], uint32(len(body)))
	copy(b[5:], body)
	_, err := c.Write(b)
	return err
}

func readMsg(c net.Conn, max int) (byte, []byte, error) {
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
