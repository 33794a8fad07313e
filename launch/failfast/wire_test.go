package failfast

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchkit/batchkit/internal/jobauth"
)

// errText is err's message, "" for nil, marked "(ErrRefused) " when it is
// ErrRefused (which dialLoop gives up on).
func errText(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrRefused):
		return "(ErrRefused) " + err.Error()
	}
	return err.Error()
}

func TestHandshake(t *testing.T) {
	type outcome struct {
		Rank            int
		DialErr, AccErr string
	}
	refusedRank := "(ErrRefused) refused: rank 0 refused this rank (another job's world size or rank?)"
	tests := []struct {
		name       string
		dialTok    string
		rank, size int
		want       outcome
	}{
		{"ok", "tok", 2, 3, outcome{Rank: 2}},
		{"wrong token", "bad", 2, 3, outcome{DialErr: "(ErrRefused) refused: pipe does not know this job's token",
			AccErr: "(ErrRefused) refused: bad job token"}},
		{"rank out of range", "tok", 3, 3, outcome{DialErr: refusedRank, AccErr: "(ErrRefused) refused: rank 3 of 3 does not fit this world of 3"}},
		{"rank 0", "tok", 0, 3, outcome{DialErr: refusedRank, AccErr: "(ErrRefused) refused: rank 0 of 3 does not fit this world of 3"}},
		{"other world size", "tok", 1, 4, outcome{DialErr: refusedRank, AccErr: "(ErrRefused) refused: rank 1 of 4 does not fit this world of 3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, d := net.Pipe()
			errc := make(chan error, 1)
			go func() { errc <- dial(d, tt.dialTok, tt.rank, tt.size); d.Close() }()
			rank, accErr := accept(a, "tok", 3)
			a.Close()
			got := outcome{Rank: rank, DialErr: errText(<-errc), AccErr: errText(accErr)}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// collective is the TCP collective's handshake as far as its hello and
// labels go (trainer/collective/tcp/auth.go): neither protocol takes the
// other's hello.
var collective = &jobauth.Protocol{Magic: "bkcl", Label: "batchkit collective v1", NotPeer: errors.New("not a batchkit collective peer")}

func TestHandshakeOtherProtocol(t *testing.T) {
	fields := make([]byte, 12)
	for _, tt := range []struct {
		name   string
		dial   func(c net.Conn) error
		accept func(c net.Conn) error
		want   [2]string // the dialer's error, the acceptor's
	}{
		{"a watcher dials a collective rank",
			func(c net.Conn) error { return dial(c, "tok", 1, 2) },
			func(c net.Conn) error {
				_, _, err := collective.Accept(c, "tok", fields, 0, time.Now().Add(time.Second))
				return err
			},
			[2]string{"closed during the handshake", "not a batchkit collective peer"}},
		{"a collective rank dials the hub",
			func(c net.Conn) error {
				return collective.Dial(c, jobauth.Dialer{Token: "tok", Fields: fields}, time.Now().Add(time.Second))
			},
			func(c net.Conn) error { _, err := accept(c, "tok", 2); return err },
			[2]string{"closed during the handshake", "(ErrRefused) refused: not a batchkit fail-fast watcher"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, d := net.Pipe()
			errc := make(chan error, 1)
			go func() { errc <- tt.dial(d); d.Close() }()
			accErr := tt.accept(a)
			a.Close()
			if diff := cmp.Diff(tt.want, [2]string{errText(<-errc), errText(accErr)}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
