package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/batchkit/batchkit/envvars"
)

// Rank 0 listens on every interface and never dials MASTER_ADDR, so a
// MASTER_ADDR that names no host, or another host, used to leave it waiting
// the whole rendezvous timeout for ranks that could not reach it. Before it
// listens it checks that MASTER_ADDR resolves to one of its own addresses,
// and fails at once, saying what it resolved, when it certainly does not.
// Behind NAT (or in a container) the address the others dial may be on no
// interface of rank 0's host: BATCHKIT_MASTER_ADDR_CHECK=0 skips the check.

// masterCheckTimeout bounds the lookup: a resolver that does not answer
// leaves the question open (the other ranks retry such lookups too).
const masterCheckTimeout = 5 * time.Second

// hostLookups are what the check asks the system; systemLookups outside
// tests.
type hostLookups struct {
	resolve    func(ctx context.Context, host string) ([]net.IPAddr, error)
	interfaces func() ([]net.Addr, error)
}

var systemLookups = hostLookups{resolve: net.DefaultResolver.LookupIPAddr, interfaces: net.InterfaceAddrs}

// masterAddrError: MASTER_ADDR does not resolve (Err is the resolver's),
// or resolves to addresses none of which is this host's.
type masterAddrError struct {
	Addr     string
	Resolved []net.IP
	Local    []net.IP // this host's addresses, to say which would do
	Err      error
}

func (e *masterAddrError) Unwrap() error { return e.Err }

func (e *masterAddrError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s=%s does not resolve: %v", envvars.MasterAddr, e.Addr, e.Err)
	}
	msg := fmt.Sprintf("%s=%s resolves to %s, which no interface of this host has: rank 0 must run on %s's host",
		envvars.MasterAddr, e.Addr, ipList(e.Resolved), envvars.MasterAddr)
	if reachable := slices.DeleteFunc(slices.Clone(e.Local), hostOnly); len(reachable) > 0 {
		msg += " (this host is " + ipList(reachable) + ")"
	}
	return msg + fmt.Sprintf("; if the address reaches this host through NAT, set %s=0", envvars.MasterAddrCheck)
}

// hostOnly: an address other hosts cannot dial, left out of the hint.
func hostOnly(ip net.IP) bool { return ip.IsLoopback() || ip.IsLinkLocalUnicast() }

func ipList(ips []net.IP) string {
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return strings.Join(s, ", ")
}

// checkMasterAddr is nil when addr is this host's, a *masterAddrError when
// it certainly is not, and otherwise nil with a warning saying why it could
// not tell (a resolver that does not answer, no interface list). A
// loopback or wildcard address counts as this host's: it reaches rank 0
// from every rank on its host, and only the ranks can know whether all of
// them are there (a two-node test cluster on one machine maps both names
// to 127.0.0.1).
func checkMasterAddr(ctx context.Context, addr string, l hostLookups) (warning string, err error) {
	addrs, err := l.resolve(ctx, addr)
	switch {
	case notFound(err) != nil:
		return "", &masterAddrError{Addr: addr, Err: err}
	case err != nil:
		return fmt.Sprintf("cannot check %s=%s: %v", envvars.MasterAddr, addr, err), nil
	}
	resolved := make([]net.IP, len(addrs))
	for i, a := range addrs {
		resolved[i] = a.IP
	}
	if slices.ContainsFunc(resolved, anyHost) {
		return "", nil
	}
	ifaddrs, err := l.interfaces()
	if err != nil {
		return fmt.Sprintf("cannot check %s=%s: this host's addresses: %v", envvars.MasterAddr, addr, err), nil
	}
	local := interfaceIPs(ifaddrs)
	if slices.ContainsFunc(resolved, func(ip net.IP) bool { return slices.ContainsFunc(local, ip.Equal) }) {
		return "", nil
	}
	return "", &masterAddrError{Addr: addr, Resolved: resolved, Local: local}
}

// notFound is err's resolver answer that the name does not exist, or nil
// (a resolver that cannot be reached says nothing about the name).
func notFound(err error) *net.DNSError {
	var de *net.DNSError
	if errors.As(err, &de) && de.IsNotFound {
		return de
	}
	return nil
}

// anyHost: an address that reaches whichever host dials it.
func anyHost(ip net.IP) bool { return ip.IsLoopback() || ip.IsUnspecified() }

func interfaceIPs(addrs []net.Addr) []net.IP {
	var ips []net.IP
	for _, a := range addrs {
		switch a := a.(type) {
		case *net.IPNet:
			ips = append(ips, a.IP)
		case *net.IPAddr:
			ips = append(ips, a.IP)
		}
	}
	return ips
}

// checkRootAddr is rank 0's check of MASTER_ADDR against the system's
// lookups, unless turned off; what it could not tell goes to the log.
func checkRootAddr(o *Options, deadline time.Time) error {
	if o.NoMasterAddrCheck {
		return nil
	}
	ctx, cancel := context.WithDeadline(context.Background(), earlier(deadline, time.Now().Add(masterCheckTimeout)))
	defer cancel()
	warning, err := checkMasterAddr(ctx, o.MasterAddr, systemLookups)
	if warning != "" {
		o.Logf("collective: rank 0: %s (going on)", warning)
	}
	if err != nil {
		return &backend.SetupError{Err: fmt.Errorf("rendezvous: %w", err)}
	}
	return nil
}
