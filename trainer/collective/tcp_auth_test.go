package collective

import (
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheckAcceptor(t *testing.T) {
	o := &tcpOptions{Rank: 1, Size: 4}
	addr := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 2), Port: 29500}
	other := uint8(byteOrderLittle)
	if nativeByteOrder == byteOrderLittle {
		other = byteOrderBig
	}
	good := hello{version: tcpVersion, byteOrder: nativeByteOrder, purpose: purposeMesh, size: 4, rank: 3}
	for _, c := range []struct {
		name   string
		change func(h *hello)
		want   string
	}{
		{"the rank wanted", func(*hello) {}, ""},
		{"byte order", func(h *hello) { h.byteOrder = other },
			"rank 3 is " + byteOrderName(other) + ", this rank " + byteOrderName(nativeByteOrder) + ": mixed byte orders are not supported"},
		{"world size", func(h *hello) { h.size = 5 },
			"world size mismatch: rank 3 at 10.0.0.2:29500 has 5 ranks, rank 1 has 4"},
		{"another rank", func(h *hello) { h.rank = 2 },
			"10.0.0.2:29500 is rank 2 (purpose 2), expected rank 3 (purpose 2)"},
		{"another purpose", func(h *hello) { h.purpose = purposeRendezv },
			"10.0.0.2:29500 is rank 3 (purpose 1), expected rank 3 (purpose 2)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := good
			c.change(&h)
			if diff := cmp.Diff(c.want, tcpErrString(checkAcceptor(&h, o, purposeMesh, 3, addr))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestAwaitAccept(t *testing.T) {
	for _, c := range []struct {
		name string
		typ  byte
		body string
		want string
	}{
		{"accepted", tcpMsgAccept, "", ""},
		{"refused", tcpMsgAbort, "world size mismatch", "rank 0 refused this rank: world size mismatch"},
		{"nonsense", tcpMsgReady, "", "rank 0 sent message type 5 during the handshake"},
	} {
		t.Run(c.name, func(t *testing.T) {
			near, far := net.Pipe()
			defer near.Close()
			go func() {
				writeMsg(far, c.typ, []byte(c.body))
				far.Close()
			}()
			if diff := cmp.Diff(c.want, tcpErrString(awaitAccept(near, 0))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// The job token's variable is named in newTCP's error as envvars spells it.
func TestTCPNoToken(t *testing.T) {
	o := tcpTestOptions(0, 2, 1)
	o.Token = ""
	_, err := newTCP(o)
	if diff := cmp.Diff("no job token (set BATCHKIT_JOB_TOKEN)", tcpErrString(err)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
