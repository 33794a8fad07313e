package jobauth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Two protocols as the collective and the fail-fast watcher are: the same
// steps, their own magic and labels, a version in the first field byte.
var (
	alpha = &Protocol{Magic: "alph", Label: "alpha",
		NotPeer: errors.New("not an alpha peer"), Version: versionIs(1), TokenHint: ": set TOKEN alike"}
	beta = &Protocol{Magic: "beta", Label: "beta",
		NotPeer: errors.New("not a beta peer"), Version: versionIs(1)}
	// alpha2 is alpha's next version.
	alpha2 = &Protocol{Magic: alpha.Magic, Label: alpha.Label,
		NotPeer: alpha.NotPeer, Version: versionIs(2), TokenHint: alpha.TokenHint}
)

func versionIs(v byte) func([]byte) error {
	return func(f []byte) error {
		if f[0] != v {
			return fmt.Errorf("version %d, this process %d", f[0], v)
		}
		return nil
	}
}

// What each side says: a version byte, then who it is.
var (
	fieldsD = []byte("\x01dialer fields")
	fieldsA = []byte("\x01accept fields")
)

// kind is err as "refused: …", "io: …", "other: …" or "".
func kind(err error) string {
	var re *RefusedError
	var ie *IOError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &re):
		return "refused: " + err.Error()
	case errors.As(err, &ie):
		return "io: " + err.Error()
	}
	return "other: " + err.Error()
}

// outcome is both sides' view of one handshake.
type outcome struct {
	Dial, Accept string // kind of each side's error
	Saw          string // the acceptor's fields, as the dialer's verdict saw them
	Got, Extra   string // the dialer's fields and extra bytes, as the acceptor got them
}

// side is one end's protocol, token and fields.
type side struct {
	p      *Protocol
	token  string
	fields []byte
}

// handshake runs d against a over a pipe; the acceptor says ok ("k") when
// it accepts.
func handshake(d, a side) outcome {
	dc, ac := net.Pipe()
	defer dc.Close()
	var o outcome
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer ac.Close()
		peer, extra, err := a.p.Accept(ac, a.token, a.fields, 4, time.Now().Add(time.Second))
		o.Accept, o.Got, o.Extra = kind(err), string(peer), string(extra)
		if err == nil {
			ac.Write([]byte("k"))
		}
	}()
	verdict := func(c net.Conn, fields []byte) error {
		o.Saw = string(fields)
		var ok [1]byte
		if _, err := io.ReadFull(c, ok[:]); err != nil || ok[0] != 'k' {
			return Refusedf("no ok")
		}
		return nil
	}
	err := d.p.Dial(dc, Dialer{Token: d.token, Fields: d.fields, Extra: []byte("xtra"), Verdict: verdict}, time.Now().Add(time.Second))
	dc.Close()
	<-done
	o.Dial = kind(err)
	return o
}

func TestHandshake(t *testing.T) {
	badToken := outcome{Dial: "refused: pipe does not know this job's token: set TOKEN alike", Accept: "refused: bad job token"}
	for _, tt := range []struct {
		name string
		d, a side
		want outcome
	}{
		{"same token", side{alpha, "tok", fieldsD}, side{alpha, "tok", fieldsA},
			outcome{Saw: string(fieldsA), Got: string(fieldsD), Extra: "xtra"}},
		{"the dialer's token is wrong", side{alpha, "other", fieldsD}, side{alpha, "tok", fieldsA}, badToken},
		{"the acceptor's token is wrong", side{alpha, "tok", fieldsD}, side{alpha, "other", fieldsA}, badToken},
		{"no token on the dialer", side{alpha, "", fieldsD}, side{alpha, "tok", fieldsA}, badToken},
		// Another protocol is refused on its magic, before any answer.
		{"a beta dialer", side{beta, "tok", fieldsD}, side{alpha, "tok", fieldsA},
			outcome{Dial: "io: closed during the handshake", Accept: "refused: not an alpha peer"}},
		{"a beta acceptor", side{alpha, "tok", fieldsD}, side{beta, "tok", fieldsA},
			outcome{Dial: "io: closed during the handshake", Accept: "refused: not a beta peer"}},
		// Another version is answered, so that both sides say why.
		{"a dialer of the next version", side{alpha2, "tok", []byte("\x02dialer fields")}, side{alpha, "tok", fieldsA},
			outcome{Dial: "refused: pipe speaks version 1, this process 2", Accept: "refused: version 2, this process 1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, handshake(tt.d, tt.a)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// answer sends hd and reads an acceptor's hello and proof.
func answer(c net.Conn, hd []byte) (ha, proof []byte) {
	c.Write(hd)
	in := make([]byte, len(hd)+macLen)
	io.ReadFull(c, in)
	return in[:len(hd)], in[len(hd):]
}

// TestAccept: an acceptor's verdict on dialers that do not play by the
// rules. Each script is the dialer's end.
func TestAccept(t *testing.T) {
	hd, _ := alpha.Hello(fieldsD)
	betaHello, _ := beta.Hello(fieldsD)
	proofUnder := func(token, label string) func(c net.Conn) {
		return func(c net.Conn) {
			ha, _ := answer(c, hd)
			c.Write(mac(token, label, hd, ha))
		}
	}
	for _, tt := range []struct {
		name   string
		script func(c net.Conn)
		want   string
	}{
		{"the right proof", proofUnder("tok", alpha.dialerLabel()), ""},
		{"silent", func(net.Conn) {}, "io: no handshake in time"},
		{"a truncated hello", func(c net.Conn) { c.Write(hd[:10]); c.Close() }, "io: closed during the handshake"},
		{"garbage", func(c net.Conn) { fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n%-48s", "") },
			"refused: not an alpha peer"},
		{"a beta hello", func(c net.Conn) { c.Write(betaHello) }, "refused: not an alpha peer"},
		{"no proof", func(c net.Conn) { answer(c, hd); c.Close() }, "io: closed during the handshake"},
		{"a proof cut short", func(c net.Conn) { answer(c, hd); c.Write(make([]byte, macLen/2)); c.Close() },
			"io: closed during the handshake"},
		{"the acceptor's proof reflected", func(c net.Conn) {
			_, proof := answer(c, hd)
			c.Write(proof)
		}, "refused: bad job token"},
		{"a proof under the acceptor's label", proofUnder("tok", alpha.acceptorLabel()), "refused: bad job token"},
		{"a proof under beta's label", proofUnder("tok", beta.dialerLabel()), "refused: bad job token"},
		{"a proof without the token", proofUnder("", alpha.dialerLabel()), "refused: bad job token"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dc, ac := net.Pipe()
			go tt.script(dc)
			_, _, err := alpha.Accept(ac, "tok", fieldsA, 0, time.Now().Add(100*time.Millisecond))
			ac.Close()
			dc.Close()
			if diff := cmp.Diff(tt.want, kind(err)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestDial: a dialer's verdict on acceptors that do not play by the rules,
// and what it sends them after their answer.
func TestDial(t *testing.T) {
	ha, _ := alpha.Hello(fieldsA)
	betaHa, _ := beta.Hello(fieldsA)
	// reply is an acceptor that answers the dialer's hello hd with
	// respond(hd) and says what came after.
	reply := func(respond func(hd []byte) (ha, proof []byte)) func(c net.Conn) string {
		return func(c net.Conn) string {
			hd := make([]byte, len(ha))
			io.ReadFull(c, hd)
			ha, proof := respond(hd)
			c.Write(append(append([]byte(nil), ha...), proof...))
			after, _ := io.ReadAll(c)
			switch {
			case len(after) == 0:
				return "nothing"
			case bytes.HasPrefix(after, mac("tok", alpha.dialerLabel(), hd, ha)):
				return fmt.Sprintf("the proof and %q", after[macLen:])
			}
			return fmt.Sprintf("%d other bytes", len(after))
		}
	}
	proof := func(token, label string) func(hd []byte) ([]byte, []byte) {
		return func(hd []byte) ([]byte, []byte) { return ha, mac(token, label, hd, ha) }
	}
	notAlpha := "refused: pipe answered, but it is not an alpha peer (another service on that port?)"
	wrongToken := "refused: pipe does not know this job's token: set TOKEN alike"
	for _, tt := range []struct {
		name   string
		script func(c net.Conn) string
		want   [2]string // Dial's error, what the acceptor got after its answer
	}{
		{"the right proof, no ok", reply(proof("tok", alpha.acceptorLabel())), [2]string{"refused: no ok", `the proof and "xtra"`}},
		{"silent", func(c net.Conn) string { io.ReadAll(c); return "" }, [2]string{"io: no handshake in time", ""}},
		{"closes after the hello", func(c net.Conn) string { io.ReadFull(c, make([]byte, len(ha))); c.Close(); return "" },
			[2]string{"io: closed during the handshake", ""}},
		{"garbage", reply(func([]byte) ([]byte, []byte) { return bytes.Repeat([]byte("x"), len(ha)), make([]byte, macLen) }),
			[2]string{notAlpha, "nothing"}},
		{"a beta acceptor", reply(func(hd []byte) ([]byte, []byte) { return betaHa, mac("tok", beta.acceptorLabel(), hd, betaHa) }),
			[2]string{notAlpha, "nothing"}},
		// A false acceptor gets a dummy, never a proof it could relay.
		{"a wrong token", reply(proof("other", alpha.acceptorLabel())), [2]string{wrongToken, "32 other bytes"}},
		{"a proof under the dialer's label", reply(proof("tok", alpha.dialerLabel())), [2]string{wrongToken, "32 other bytes"}},
		{"the dialer's hello echoed", reply(func(hd []byte) ([]byte, []byte) { return hd, make([]byte, macLen) }),
			[2]string{wrongToken, "32 other bytes"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dc, ac := net.Pipe()
			got := make(chan string, 1)
			go func() { got <- tt.script(ac); ac.Close() }()
			d := Dialer{Token: "tok", Fields: fieldsD, Extra: []byte("xtra"), Verdict: func(c net.Conn, _ []byte) error {
				c.Close() // no verdict: the acceptor's ReadAll ends
				return Refusedf("no ok")
			}}
			err := alpha.Dial(dc, d, time.Now().Add(100*time.Millisecond))
			dc.Close()
			if diff := cmp.Diff(tt.want, [2]string{kind(err), <-got}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestHello(t *testing.T) {
	h1, err1 := alpha.Hello(fieldsD)
	h2, err2 := alpha.Hello(fieldsD)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	layout := func(h []byte) string {
		return string(h[:magicLen]) + "|" + string(fields(h)) + "|" + fmt.Sprint(len(h))
	}
	if diff := cmp.Diff("alph|\x01dialer fields|"+fmt.Sprint(magicLen+len(fieldsD)+nonceLen), layout(h1)); diff != "" {
		t.Errorf("layout (-want +got):\n%s", diff)
	}
	if bytes.Equal(h1, h2) {
		t.Errorf("two hellos alike: the nonce is not fresh")
	}
	if strings.Contains(string(h1), "tok") {
		t.Errorf("a hello carries the token")
	}
}
