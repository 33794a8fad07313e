package rendezvous

import (
	"errors"
	"fmt"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/batchkit/batchkit/trainer/collective/tcp/internal/tcptest"
	"github.com/google/go-cmp/cmp"
)

// The steps of the rendezvous, one at a time; TestTCPRendezvousTimeout,
// TestTCPMisconfiguredWorld and TestTCPRogueConnections (tcp_test.go) run
// them together.

func TestJoinTable(t *testing.T) {
	local := []net.Addr{
		nil, // rank 0 sends no record
		&net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 40000},
		&net.TCPAddr{IP: net.ParseIP("fd00::7"), Port: 65535},
	}
	joins := make([][]byte, len(local))
	for r, a := range local[1:] {
		joins[r+1] = joinRecord(a.(*net.TCPAddr).Port, a)
	}
	got, err := tableAddrs(joinTable(joins), len(joins))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"[::]:0", "10.1.2.3:40000", "[fd00::7]:65535"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("addresses (-want +got):\n%s", diff)
	}
}

// TestTCPSetupReasons: what the rendezvous and handshake steps say when
// something is wrong, one row per reason (a *SetupError's shows as such).
func TestTCPSetupReasons(t *testing.T) {
	o := &Options{Rank: 1, Size: 4, MasterAddr: "node0", RendezvousTimeout: time.Second}
	addr := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 2), Port: 29500}
	acceptor := func(change func(h *hello)) error {
		h := hello{version: tcpVersion, byteOrder: nativeByteOrder, purpose: purposeMesh, size: 4, rank: 3}
		change(&h)
		return checkAcceptor(&h, o, purposeMesh, 3, addr)
	}
	other := uint8(byteOrderLittle)
	if nativeByteOrder == byteOrderLittle {
		other = byteOrderBig
	}
	table := func(bytes, size int) error {
		_, err := tableAddrs(make([]byte, bytes), size)
		return err
	}
	for _, c := range []struct {
		name string
		got  error
		want string
	}{
		{"table short", table(2*joinLen-1, 2), "rendezvous: address table of 35 bytes for 2 ranks"},
		{"table long", table(3*joinLen, 2), "rendezvous: address table of 54 bytes for 2 ranks"},
		{"table empty", table(0, 3), "rendezvous: address table of 0 bytes for 3 ranks"},

		{"timeout, one rank", errors.New(timeoutReason("h:1", 2*time.Second, []int{3}, 4, "never connected", 0)),
			"rendezvous at h:1 timed out after 2s: rank 3 of 4 never connected"},
		{"timeout, ranks", errors.New(timeoutReason("h:1", 2*time.Second, []int{1, 2}, 4, "did not finish connecting to their peers", 0)),
			"rendezvous at h:1 timed out after 2s: ranks 1, 2 of 4 did not finish connecting to their peers"},
		{"timeout, refusals", errors.New(timeoutReason("h:1", 2*time.Second, []int{1}, 4, "never connected", 2)),
			"rendezvous at h:1 timed out after 2s: rank 1 of 4 never connected (2 connection(s) refused meanwhile: a wrong job token, or not a batchkit rank; see the log)"},

		{"report: links up", meshReport{rank: 2, typ: tcpMsgMeshOK}.check(), ""},
		{"report: left", meshReport{rank: 2, err: errors.New("EOF")}.check(), "rendezvous: rank 2 left while building the mesh: EOF"},
		{"report: abort", meshReport{rank: 2, typ: tcpMsgAbort, body: []byte("rendezvous: rank 2: no link")}.check(), "rendezvous: rank 2: no link"},
		{"report: other", meshReport{rank: 3, typ: tcpMsgTable}.check(), "rendezvous: rank 3 sent message type 3 while building the mesh"},

		{"rank 0: bad address", rootDialError(o, "node0:1", &authError{Err: &net.AddrError{Err: "missing ']' in address", Addr: "[::1"}}),
			`setup: rendezvous: MASTER_ADDR "node0": address [::1: missing ']' in address`},
		{"rank 0: no such name", rootDialError(o, "node0:1", &net.OpError{Op: "dial", Net: "tcp",
			Err: &net.DNSError{Err: "no such host", Name: "node0", Server: "10.0.0.53:53", IsNotFound: true}}),
			"setup: rendezvous: MASTER_ADDR=node0 does not resolve: lookup node0 on 10.0.0.53:53: no such host"},
		{"rank 0: refused", rootDialError(o, "node0:1", fatalf("rank 0 refused this rank: world size mismatch")),
			"setup: rendezvous at node0:1: rank 0 refused this rank: world size mismatch"},
		{"rank 0: no answer", rootDialError(o, "node0:1", errors.New("connection refused")),
			"rendezvous: could not reach rank 0 at node0:1 within 1s: connection refused"},

		{"acceptor: the rank wanted", acceptor(func(*hello) {}), ""},
		{"acceptor: byte order", acceptor(func(h *hello) { h.byteOrder = other }),
			"rank 3 is " + byteOrderName(other) + ", this rank " + byteOrderName(nativeByteOrder) + ": mixed byte orders are not supported"},
		{"acceptor: world size", acceptor(func(h *hello) { h.size = 5 }),
			"world size mismatch: rank 3 at 10.0.0.2:29500 has 5 ranks, rank 1 has 4"},
		{"acceptor: another rank", acceptor(func(h *hello) { h.rank = 2 }),
			"10.0.0.2:29500 is rank 2 (purpose 2), expected rank 3 (purpose 2)"},
		{"acceptor: another purpose", acceptor(func(h *hello) { h.purpose = purposeRendezv }),
			"10.0.0.2:29500 is rank 3 (purpose 1), expected rank 3 (purpose 2)"},

		{"verdict: accepted", tcpAwaitAcceptOf(tcpMsgAccept, ""), ""},
		{"verdict: refused", tcpAwaitAcceptOf(tcpMsgAbort, "world size mismatch"), "rank 0 refused this rank: world size mismatch"},
		{"verdict: nonsense", tcpAwaitAcceptOf(tcpMsgReady, ""), "rank 0 sent message type 5 during the handshake"},
	} {
		if diff := cmp.Diff(c.want, tcpErrString(c.got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}

// tcpAwaitAcceptOf is awaitAccept's verdict on a message of type typ.
func tcpAwaitAcceptOf(typ byte, body string) error {
	near, far := net.Pipe()
	defer near.Close()
	go func() {
		WriteMsg(far, typ, []byte(body))
		far.Close()
	}()
	return awaitAccept(near, 0)
}

// tcpErrString is err's message, "" for nil, marked "setup: " for a
// *SetupError.
func tcpErrString(err error) string {
	var se *backend.SetupError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &se):
		return "setup: " + err.Error()
	}
	return err.Error()
}

// tcpConnPair is both ends of a loopback connection; closed when the test ends.
func tcpConnPair(t *testing.T) (near, far *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	far, err = net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	near, err = ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { near.Close(); far.Close() })
	return near, far
}

// tcpJoiner is an authenticated dialer's hello as an acceptor hands it on,
// and the dialer's end of its connection.
func tcpJoiner(t *testing.T, rank, size int, purpose uint8) (*peerHello, *net.TCPConn) {
	near, far := tcpConnPair(t)
	h := hello{version: tcpVersion, byteOrder: nativeByteOrder, purpose: purpose, size: uint32(size), rank: uint32(rank)}
	return &peerHello{hello: h, conn: near}, far
}

// tcpReadMsgType is the type of the next message on c, or what kept it.
func tcpReadMsgType(c net.Conn) string {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	typ, body, err := ReadMsg(c, 1<<16)
	switch {
	case err != nil:
		return err.Error()
	case typ == tcpMsgAbort:
		return "abort: " + string(body)
	case typ == tcpMsgAccept:
		return "accept"
	}
	return "other"
}

// TestRootAdmit: rank 0 admitting ranks one after the other. The errors and
// what the joining rank hears are compared by prefix: they name addresses.
func TestRootAdmit(t *testing.T) {
	o := &Options{Rank: 0, Size: 3, Logf: func(string, ...any) {}}
	r := &rootRendezvous{o: o, deadline: time.Now().Add(time.Minute),
		conns: make([]*net.TCPConn, o.Size), joins: make([][]byte, o.Size)}
	var last *net.TCPConn // the dialer's end of the last rank admitted
	for _, c := range []struct {
		name       string
		rank, size int
		backend    string // "" is tcp's own rendezvous, else a star's
		lastLeft   bool   // the last rank admitted gave up before this one came
		wantErr    string
		wantFar    string
	}{
		{"rank 1", 1, 3, "", false, "", "accept"},
		{"rank 1 again: two processes with one rank", 1, 3, "", false,
			"setup: rendezvous: rank 1 joined twice, from 127.0.0.1:", "abort: rendezvous: rank 1 joined twice"},
		{"rank 1 retrying after it gave up", 1, 3, "", true, "", "accept"},
		{"another world size", 2, 4, "", false, "setup: rendezvous: world size mismatch", "abort: world size mismatch"},
		{"rank 2 given --backend ccl", 2, 3, "ccl", false,
			"setup: rendezvous: rank 2 uses the ccl backend, rank 0 the tcp backend: every rank must be given the same --backend",
			"abort: rank 2 uses the ccl backend, rank 0 the tcp backend"},
	} {
		if c.lastLeft {
			last.Close()
		}
		purpose, name := uint8(purposeRendezv), "tcp"
		if c.backend != "" {
			purpose, name = purposeStar, c.backend
		}
		h, far := tcpJoiner(t, c.rank, c.size, purpose)
		h.extra = append([]byte(fmt.Sprintf("%-*.*s", joinLen, joinLen, c.name)), nameRecord(name)...)
		if got := tcpErrString(r.admit(h)); !strings.HasPrefix(got, c.wantErr) || (c.wantErr == "") != (got == "") {
			t.Errorf("%s: admit: %q, want %q...", c.name, got, c.wantErr)
		}
		if got := tcpReadMsgType(far); !strings.HasPrefix(got, c.wantFar) {
			t.Errorf("%s: the rank heard %q, want %q...", c.name, got, c.wantFar)
		}
		if c.wantErr == "" {
			last = far
		}
	}
	if r.joined != 1 || string(r.joins[1][:joinLen]) != "rank 1 retrying af" {
		t.Errorf("joined %d, rank 1's record %q: want the retry's alone", r.joined, r.joins[1])
	}
}

func TestPeerAdmit(t *testing.T) {
	var logs tcptest.Log
	o := &Options{Rank: 3, Size: 6, Logf: logs.Logf}
	p := &peerRendezvous{o: o, late: time.Now().Add(time.Minute), conns: make([]*net.TCPConn, o.Size),
		isLink: []bool{true, false, true, false, true, false}}
	for _, c := range []struct {
		name   string
		rank   int
		linked bool
		far    string // what the dialer hears
	}{
		{"lower rank", 2, true, "accept"},
		{"again", 2, false, "abort: rank 3 already has a link from rank 2"},
		{"a rank that should be dialed", 4, false, "abort: rank 3 takes no link from rank 4"},
		{"a rank it does not link to", 1, false, "abort: rank 3 takes no link from rank 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, far := tcpJoiner(t, c.rank, o.Size, purposeMesh)
			linked, err := p.admit(h)
			if err != nil || linked != c.linked {
				t.Errorf("admit: %v, %v; want %v, nil", linked, err, c.linked)
			}
			if got := tcpReadMsgType(far); got != c.far {
				t.Errorf("the dialer got %q, want %q", got, c.far)
			}
		})
	}
	if n := len(logs.Grep("collective: rank 3 refused a connection from 127.0.0.1:")); n != 3 {
		t.Errorf("%d refusals logged, want 3; logs %q", n, logs.Lines())
	}
	if diff := cmp.Diff("rank 3: no link to ranks 4 after 0s", p.missingLinks().Error()); diff != "" {
		t.Errorf("missing links (-want +got):\n%s", diff)
	}
}

// The job token's variable is named in WithDefaults' error (New's) as
// envvars spells it.
func TestTCPNoToken(t *testing.T) {
	o := tcpTestOptions(0, 2, 1)
	o.Token = ""
	_, err := o.WithDefaults()
	if diff := cmp.Diff("no job token (set BATCHKIT_JOB_TOKEN)", tcpErrString(err)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
