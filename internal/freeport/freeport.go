// Package freeport asks the kernel for a free TCP port: MASTER_PORT for the
// launchers when none is given, and listening ports for tests.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// On returns a TCP port that is free on host ("" = every interface). The
// port is released before the caller binds it, so another process could
// take it in between; torchrun makes the same trade.
func On(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// BelowEphemeral returns a port free on host from below the kernel's
// ephemeral range, for a listener bound a moment later (a test's, or
// MASTER_PORT chosen by batchkit run and batchkit mpirun). A port from On
// lies in that range, where any process's outgoing connection can take it
// in between (seen in CI, with other test packages' connections
// alongside); below it the kernel assigns none by itself. The ports are
// tried one after another from a random start, each checked free. When the
// range starts too low to leave room, it is On.
func BelowEphemeral(host string) (int, error) {
	lo, hi := 10000, ephemeralStart()
	if hi-lo < 1000 {
		return On(host)
	}
	next.CompareAndSwap(0, int64(1+rand.IntN(hi-lo)))
	for range 1000 {
		port := lo + int(next.Add(1))%(hi-lo)
		if l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port))); err == nil {
			l.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port on %q from %d to %d", host, lo, hi)
}

var next atomic.Int64 // BelowEphemeral's last try, from lo

// ephemeralStart is the first port of the kernel's ephemeral range (32768
// when it cannot be read: Linux's default).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if f := strings.Fields(string(b)); err == nil && len(f) == 2 {
		if n, err := strconv.Atoi(f[0]); err == nil {
			return n
		}
	}
	return 32768
}
