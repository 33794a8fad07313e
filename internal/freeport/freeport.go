// Package freeport asks the kernel for a free TCP port: MASTER_PORT for the
// launchers when none is given, and listening ports for tests.
package freeport

import "net"

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
