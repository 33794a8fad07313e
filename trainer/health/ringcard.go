package health

import (
	"encoding/binary"
	"fmt"
	"net"
)

// A card is what a rank announces before the ring probe: where it
// listens (its port; its machine's name and global unicast addresses, up
// to maxIPs) and a secret of which only rank 0's is used.
type card struct {
	port   int
	host   string
	ips    []net.IP
	secret []byte
}

const (
	maxIPs    = 4
	secretLen = 32
	// cardLen: port, host (a length, maxNode bytes), the addresses (a
	// count, 16 bytes each), the secret.
	cardLen = 2 + 1 + maxNode + 1 + 16*maxIPs + secretLen
)

// announce is this rank's card: no port when it could not listen.
func announce(ln *net.TCPListener, host string, secret []byte) card {
	c := card{host: host, secret: secret}
	if ln == nil {
		return c
	}
	c.port = ln.Addr().(*net.TCPAddr).Port
	addrs, _ := net.InterfaceAddrs()
	c.ips = unicast(addrs)
	return c
}

// unicast are the global unicast addresses of addrs, IPv4 first, up to
// maxIPs.
func unicast(addrs []net.Addr) []net.IP {
	var v4, v6 []net.IP
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || !n.IP.IsGlobalUnicast() {
			continue
		}
		if n.IP.To4() != nil {
			v4 = append(v4, n.IP)
		} else {
			v6 = append(v6, n.IP)
		}
	}
	all := append(v4, v6...)
	return all[:min(len(all), maxIPs)]
}

func (c card) encode() []byte {
	b := make([]byte, cardLen)
	binary.BigEndian.PutUint16(b, uint16(c.port))
	h := c.host[:min(len(c.host), maxNode)]
	b[2] = byte(len(h))
	copy(b[3:], h)
	at := 3 + maxNode
	b[at] = byte(len(c.ips))
	for i, ip := range c.ips {
		copy(b[at+1+16*i:], ip.To16())
	}
	copy(b[cardLen-secretLen:], c.secret)
	return b
}

func decodeCard(b []byte) card {
	c := card{port: int(binary.BigEndian.Uint16(b)), host: string(b[3 : 3+min(int(b[2]), maxNode)])}
	at := 3 + maxNode
	for i := range min(int(b[at]), maxIPs) {
		c.ips = append(c.ips, net.IP(append([]byte(nil), b[at+1+16*i:at+17+16*i]...)))
	}
	c.secret = append([]byte(nil), b[cardLen-secretLen:]...)
	return c
}

// exchange gives every rank every rank's card (an Allgather, a byte to a
// float64 as Gather sends strings).
func exchange(c Comm, mine card) ([]card, error) {
	send := make([]float64, cardLen)
	for i, x := range mine.encode() {
		send[i] = float64(x)
	}
	recv := make([]float64, cardLen*c.Size())
	if err := c.Allgather(send, recv); err != nil {
		return nil, fmt.Errorf("ring probe: %w", err)
	}
	out := make([]card, c.Size())
	b := make([]byte, cardLen)
	for r := range out {
		for i := range b {
			b[i] = byte(recv[r*cardLen+i])
		}
		out[r] = decodeCard(b)
	}
	return out, nil
}
