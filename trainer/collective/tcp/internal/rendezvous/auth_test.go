package rendezvous

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/internal/jobauth"
)

// failfast is the fail-fast watcher's handshake as far as its hello and
// labels go (launch/failfast/wire.go): neither protocol takes the other's
// hello.
var failfast = &jobauth.Protocol{Magic: "bkff", Label: "batchkit failfast v1", NotPeer: errors.New("not a batchkit fail-fast watcher")}

// TestTCPHandshake: the collective's handshake end to end, one row per
// outcome; internal/jobauth tests the steps themselves.
func TestTCPHandshake(t *testing.T) {
	o := func(rank, size int, token string) *Options { return &Options{Rank: rank, Size: size, Token: token} }
	soon := func() time.Time { return time.Now().Add(time.Second) }
	dialRank1 := func(token string, extra []byte) func(net.Conn) error {
		return func(c net.Conn) error { return dialHandshake(c, o(1, 2, token), purposeMesh, 0, extra, soon()) }
	}
	acceptRank0 := func(extra string) func(*net.TCPConn) error {
		return func(c *net.TCPConn) error { return tcpAcceptOf(c, o(0, 2, "tok"), extra) }
	}
	// dialAs and acceptAs speak p with hello fields f. The dialer waits
	// for no verdict: where it dials, the acceptor refuses after answering.
	dialAs := func(p *jobauth.Protocol, f []byte) func(net.Conn) error {
		return func(c net.Conn) error { return p.Dial(c, jobauth.Dialer{Token: "tok", Fields: f}, soon()) }
	}
	acceptAs := func(p *jobauth.Protocol, f []byte) func(*net.TCPConn) error {
		return func(c *net.TCPConn) error { _, _, err := p.Accept(c, "tok", f, 0, soon()); return err }
	}
	fields := newHello(1, 2, purposeMesh).fields()
	next := newHello(1, 2, purposeMesh)
	next.version = tcpVersion + 1
	v2 := next.fields()
	versions := "collective protocol v2, this process v1: all ranks must run the same batchkit version"
	for _, tt := range []struct {
		name   string
		dial   func(c net.Conn) error
		accept func(c *net.TCPConn) error
		want   [2]string // the dialer's error, the acceptor's
	}{
		{"the rank wanted", dialRank1("tok", []byte("xy")), acceptRank0("xy"), [2]string{"", ""}},
		{"another token", dialRank1("other", nil), acceptRank0(""),
			[2]string{"fatal: 127.0.0.1:PORT does not know this job's token: job tokens differ (every rank must get the same BATCHKIT_JOB_TOKEN)",
				"fatal: bad job token"}},
		{"a dialer of the next version", dialAs(collectiveAuth, v2), acceptRank0(""), [2]string{"", "fatal: " + versions}},
		{"an acceptor of the next version", dialRank1("tok", nil), acceptAs(collectiveAuth, v2),
			[2]string{"fatal: 127.0.0.1:PORT speaks " + versions, "io: closed during the handshake"}},
		{"a watcher dials a collective rank", dialAs(failfast, fields), acceptRank0(""),
			[2]string{"io: closed during the handshake", "fatal: not a batchkit collective peer"}},
		{"a collective rank dials a watcher", dialRank1("tok", nil), acceptAs(failfast, fields),
			[2]string{"io: closed during the handshake", "fatal: not a batchkit fail-fast watcher"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			near, far := tcpConnPair(t)
			errc := make(chan error, 1)
			go func() { errc <- tt.dial(far); far.Close() }()
			accErr := tt.accept(near)
			near.Close()
			got := [2]string{tcpAuthErrString(<-errc, far.RemoteAddr()), tcpAuthErrString(accErr, nil)}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// tcpAcceptOf runs the acceptor's side on c and accepts a peer whose
// extra bytes are extra.
func tcpAcceptOf(c *net.TCPConn, o *Options, extra string) error {
	p, err := acceptHandshake(c, o, purposeMesh, len(extra), time.Now().Add(time.Second))
	if err != nil {
		return err
	}
	if reason := checkPeer(&p.hello, o, purposeMesh); reason != "" || string(p.extra) != extra {
		return errors.New(reason + ", extra " + string(p.extra))
	}
	return WriteMsg(c, tcpMsgAccept, nil)
}

// tcpAuthErrString is err's message marked "fatal: " (an *authError) or
// "io: " (a *handshakeIOError), with the address of far's peer as
// 127.0.0.1:PORT.
func tcpAuthErrString(err error, far net.Addr) string {
	var ae *authError
	var ie *handshakeIOError
	mark := ""
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ae):
		mark = "fatal: "
	case errors.As(err, &ie):
		mark = "io: "
	}
	s := mark + err.Error()
	if far != nil {
		s = strings.ReplaceAll(s, far.String(), "127.0.0.1:PORT")
	}
	return s
}
