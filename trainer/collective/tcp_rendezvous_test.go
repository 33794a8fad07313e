package collective

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

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

func TestTableAddrsLength(t *testing.T) {
	for _, c := range []struct {
		name  string
		bytes int
		size  int
		want  string
	}{
		{"short", 2*joinLen - 1, 2, "rendezvous: address table of 35 bytes for 2 ranks"},
		{"long", 3 * joinLen, 2, "rendezvous: address table of 54 bytes for 2 ranks"},
		{"empty", 0, 3, "rendezvous: address table of 0 bytes for 3 ranks"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := tableAddrs(make([]byte, c.bytes), c.size)
			if diff := cmp.Diff(c.want, tcpErrString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func tcpErrString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestTimeoutReason(t *testing.T) {
	for _, c := range []struct {
		name    string
		missing []int
		what    string
		refused int
		want    string
	}{
		{"one rank", []int{3}, "never connected", 0,
			"rendezvous at h:1 timed out after 2s: rank 3 of 4 never connected"},
		{"ranks", []int{1, 2}, "did not finish connecting to their peers", 0,
			"rendezvous at h:1 timed out after 2s: ranks 1, 2 of 4 did not finish connecting to their peers"},
		{"refusals", []int{1}, "never connected", 2,
			"rendezvous at h:1 timed out after 2s: rank 1 of 4 never connected (2 connection(s) refused meanwhile: a wrong job token, or not a batchkit rank; see the log)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := timeoutReason("h:1", 2*time.Second, c.missing, 4, c.what, c.refused)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestMeshReportCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		rep  meshReport
		want string
	}{
		{"links up", meshReport{rank: 2, typ: tcpMsgMeshOK}, ""},
		{"left", meshReport{rank: 2, err: errors.New("EOF")}, "rendezvous: rank 2 left while building the mesh: EOF"},
		{"abort", meshReport{rank: 2, typ: tcpMsgAbort, body: []byte("rendezvous: rank 2: no link")}, "rendezvous: rank 2: no link"},
		{"other", meshReport{rank: 3, typ: tcpMsgTable}, "rendezvous: rank 3 sent message type 3 while building the mesh"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, tcpErrString(c.rep.check())); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestRootDialError(t *testing.T) {
	o := &tcpOptions{MasterAddr: "node0", RendezvousTimeout: time.Second}
	for _, c := range []struct {
		name  string
		err   error
		want  string
		setup bool
	}{
		{"bad address", &authError{&net.AddrError{Err: "missing ']' in address", Addr: "[::1"}},
			`rendezvous: MASTER_ADDR "node0": address [::1: missing ']' in address`, true},
		{"refused by rank 0", fatalf("rank 0 refused this rank: world size mismatch"),
			"rendezvous at node0:1: rank 0 refused this rank: world size mismatch", true},
		{"no answer", errors.New("connection refused"),
			"rendezvous: could not reach rank 0 at node0:1 within 1s: connection refused", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := rootDialError(o, "node0:1", c.err)
			var se *SetupError
			if diff := cmp.Diff(c.want, tcpErrString(err)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if got := errors.As(err, &se); got != c.setup {
				t.Errorf("a *SetupError: %v, want %v", got, c.setup)
			}
		})
	}
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
	typ, body, err := readMsg(c, 1<<16)
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

func TestRootAdmit(t *testing.T) {
	o := &tcpOptions{Rank: 0, Size: 3, Logf: func(string, ...any) {}}
	r := &rootRendezvous{o: o, deadline: time.Now().Add(time.Minute),
		conns: make([]*net.TCPConn, o.Size), joins: make([][]byte, o.Size)}

	first, firstFar := tcpJoiner(t, 1, 3, purposeRendezv)
	first.extra = []byte("join-1")
	if err := r.admit(first); err != nil {
		t.Fatal(err)
	}
	if got := tcpReadMsgType(firstFar); got != "accept" {
		t.Errorf("rank 1 got %q, want accept", got)
	}

	// A second rank 1 while the first is still there: two processes with one rank.
	second, secondFar := tcpJoiner(t, 1, 3, purposeRendezv)
	err := r.admit(second)
	var se *SetupError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "rank 1 joined twice") {
		t.Errorf("duplicate: got %v (%T), want a *SetupError naming rank 1", err, err)
	}
	if got := tcpReadMsgType(secondFar); !strings.HasPrefix(got, "abort: rendezvous: rank 1 joined twice") {
		t.Errorf("the duplicate got %q, want the reason", got)
	}

	// Once the first has left (given up and retrying), its retry takes the slot.
	firstFar.Close()
	retry, retryFar := tcpJoiner(t, 1, 3, purposeRendezv)
	retry.extra = []byte("join-1b")
	if err := r.admit(retry); err != nil {
		t.Fatal(err)
	}
	if got := tcpReadMsgType(retryFar); got != "accept" {
		t.Errorf("the retry got %q, want accept", got)
	}
	if r.joined != 1 || r.conns[1] != retry.conn || string(r.joins[1]) != "join-1b" {
		t.Errorf("joined %d, rank 1's record %q: want the retry's alone", r.joined, r.joins[1])
	}

	// A rank of another world size fails the rendezvous.
	other, _ := tcpJoiner(t, 2, 4, purposeRendezv)
	if err := r.admit(other); !errors.As(err, &se) || !strings.Contains(err.Error(), "world size mismatch") {
		t.Errorf("world size: got %v (%T), want a *SetupError", err, err)
	}
}

func TestPeerAdmit(t *testing.T) {
	var logs tcpLog
	o := &tcpOptions{Rank: 2, Size: 4, Logf: logs.logf}
	p := &peerRendezvous{o: o, late: time.Now().Add(time.Minute), conns: make([]*net.TCPConn, o.Size)}
	for _, c := range []struct {
		name   string
		rank   int
		linked bool
		far    string // what the dialer hears
	}{
		{"lower rank", 1, true, "accept"},
		{"again", 1, false, "abort: rank 2 already has a link from rank 1"},
		{"a rank that should be dialed", 3, false, "abort: rank 2 already has a link from rank 3"},
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
	if n := len(logs.grep("collective: rank 2 refused a connection from 127.0.0.1:")); n != 2 {
		t.Errorf("%d refusals logged, want 2; logs %q", n, logs.lines)
	}
	if diff := cmp.Diff("rank 2: no link to ranks 3 after 0s", p.missingLinks().Error()); diff != "" {
		t.Errorf("missing links (-want +got):\n%s", diff)
	}
}
