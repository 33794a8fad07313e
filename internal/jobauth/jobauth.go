// Package jobauth is the mutual handshake that opens a connection between
// two processes of one job: each proves it knows the job's token without
// sending it. The TCP collective (trainer/collective/tcp) and the fail-fast
// watcher (launch/failfast) each speak it as their own Protocol, told apart
// by magic and MAC labels so that neither can be mistaken for the other.
//
// The dialer D and the acceptor A each send a hello (magic ‖ the protocol's
// fields ‖ a fresh nonce), then each proves the token with an HMAC over both
// hellos under its own label:
//
//	D → A  hello_D
//	A → D  hello_A, HMAC(token, labelA ‖ hello_D ‖ hello_A)
//	D → A  HMAC(token, labelD ‖ hello_D ‖ hello_A), then the protocol's extra bytes
//	A → D  the acceptor's verdict, in the protocol's own form
//
// The token never crosses the wire, fresh nonces defeat replay, and the
// distinct labels stop a reflected MAC from passing as the other side's. D
// checks A's proof before proving anything itself, so a process with a
// wrong token learns so at once instead of timing out, and a false acceptor
// gets no proof it could relay.
package jobauth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

const (
	magicLen = 4
	nonceLen = 32
	macLen   = sha256.Size

	// Timeout bounds one handshake, so that a silent or slow peer (a port
	// scanner, a stuck process) cannot hold the other side's attention.
	Timeout = 10 * time.Second
)

// Protocol is what one protocol's two sides agree on besides the steps.
type Protocol struct {
	Magic   string // opens every hello: magicLen bytes, distinct per protocol
	Label   string // distinct per protocol; the sides' MAC labels are Label+" acceptor" and Label+" dialer"
	NotPeer error  // what a hello that does not open with Magic is
	// Version checks a peer's hello fields before its proof is checked:
	// nil when this side speaks the same version. Its error reads after
	// "ADDR speaks ". A nil Version accepts any.
	Version func(fields []byte) error
	// TokenHint ends the dialer's wrong-token error: how to fix it.
	TokenHint string
}

// Dialer is a dialer's part in one handshake.
type Dialer struct {
	Token  string
	Fields []byte // this side's hello fields (both sides' are the same length)
	Extra  []byte // sent right after the proof, before the verdict, to save a round trip
	// Verdict checks the authenticated acceptor's hello fields and reads
	// its verdict on this dialer: nil once accepted. A nil Verdict takes
	// the acceptor's proof as the verdict.
	Verdict func(c net.Conn, fields []byte) error
}

// Hello is a hello with fields: magic ‖ fields ‖ a fresh nonce.
func (p *Protocol) Hello(fields []byte) ([]byte, error) {
	b := make([]byte, magicLen+len(fields)+nonceLen)
	copy(b, p.Magic)
	copy(b[magicLen:], fields)
	if _, err := rand.Read(b[magicLen+len(fields):]); err != nil {
		return nil, fmt.Errorf("random nonce: %w", err)
	}
	return b, nil
}

// mac is the proof of knowing token under label over both hellos.
func mac(token, label string, helloD, helloA []byte) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(label))
	m.Write(helloD)
	m.Write(helloA)
	return m.Sum(nil)
}

func (p *Protocol) acceptorLabel() string { return p.Label + " acceptor" }
func (p *Protocol) dialerLabel() string   { return p.Label + " dialer" }

// fields is a hello's part between magic and nonce.
func fields(hello []byte) []byte { return hello[magicLen : len(hello)-nonceLen] }

func (p *Protocol) version(fields []byte) error {
	if p.Version == nil {
		return nil
	}
	return p.Version(fields)
}

// Dial runs the dialer's side on c until deadline: nil once the acceptor
// has proven the token and d.Verdict has accepted its hello and verdict.
func (p *Protocol) Dial(c net.Conn, d Dialer, deadline time.Time) error {
	c.SetDeadline(deadline)
	defer c.SetDeadline(time.Time{})
	hd, err := p.Hello(d.Fields)
	if err != nil {
		return err
	}
	if _, err := c.Write(hd); err != nil {
		return ioFailure(err)
	}
	in := make([]byte, len(hd)+macLen)
	if _, err := io.ReadFull(c, in); err != nil {
		return ioFailure(err)
	}
	ha, proof := in[:len(hd)], in[len(hd):]
	if string(ha[:magicLen]) != p.Magic {
		return Refusedf("%s answered, but it is %w (another service on that port?)", c.RemoteAddr(), p.NotPeer)
	}
	if err := p.version(fields(ha)); err != nil {
		return Refusedf("%s speaks %w", c.RemoteAddr(), err)
	}
	if !hmac.Equal(proof, mac(d.Token, p.acceptorLabel(), hd, ha)) {
		// Answer with a dummy, so that the acceptor reports a bad token
		// rather than a dropped handshake. Never a real proof to an
		// acceptor that has not proven itself: it could relay it.
		dummy := make([]byte, macLen)
		rand.Read(dummy)
		c.Write(dummy)
		return Refusedf("%s does not know this job's token%s", c.RemoteAddr(), p.TokenHint)
	}
	if _, err := c.Write(append(mac(d.Token, p.dialerLabel(), hd, ha), d.Extra...)); err != nil {
		return ioFailure(err)
	}
	if d.Verdict == nil {
		return nil
	}
	return d.Verdict(c, fields(ha))
}

// Accept runs the acceptor's side on c until deadline, up to and including
// the dialer's proof and the extraLen bytes after it: the dialer's hello
// fields and those bytes once it has proven the token. The caller then
// checks the fields and sends its verdict. mine are this side's fields.
func (p *Protocol) Accept(c net.Conn, token string, mine []byte, extraLen int, deadline time.Time) (peer, extra []byte, err error) {
	c.SetDeadline(deadline)
	defer c.SetDeadline(time.Time{})
	ha, err := p.Hello(mine)
	if err != nil {
		return nil, nil, err
	}
	hd := make([]byte, len(ha))
	if _, err := io.ReadFull(c, hd); err != nil {
		return nil, nil, ioFailure(err)
	}
	if string(hd[:magicLen]) != p.Magic {
		return nil, nil, &RefusedError{p.NotPeer}
	}
	if _, err := c.Write(append(ha, mac(token, p.acceptorLabel(), hd, ha)...)); err != nil {
		return nil, nil, ioFailure(err)
	}
	// The version is checked after answering, so that a dialer of another
	// version reads so from our hello instead of a dropped connection.
	if err := p.version(fields(hd)); err != nil {
		return nil, nil, &RefusedError{err}
	}
	in := make([]byte, macLen+extraLen)
	if _, err := io.ReadFull(c, in[:macLen]); err != nil {
		return nil, nil, ioFailure(err)
	}
	if !hmac.Equal(in[:macLen], mac(token, p.dialerLabel(), hd, ha)) {
		return nil, nil, &RefusedError{ErrBadToken}
	}
	if _, err := io.ReadFull(c, in[macLen:]); err != nil {
		return nil, nil, ioFailure(err)
	}
	return fields(hd), in[macLen:], nil
}

// ErrBadToken is the acceptor's word for a dialer whose proof does not
// match its token.
var ErrBadToken = errors.New("bad job token")

// RefusedError is a handshake refused on its content (a wrong token, not a
// peer, another version, the peer's verdict): retrying cannot fix it.
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string { return e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

// Refusedf is a *RefusedError with a formatted message (%w allowed).
func Refusedf(format string, a ...any) error { return &RefusedError{fmt.Errorf(format, a...)} }

// IOError is a handshake that broke off (closed, timed out, reset), as
// opposed to one refused on its content: retrying may help.
type IOError struct{ Err error }

func (e *IOError) Error() string { return e.Err.Error() }
func (e *IOError) Unwrap() error { return e.Err }

// ioFailure says what broke a handshake off, in words for a log line.
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
	return &IOError{err}
}
