package rendezvous

import (
	"context"
	"errors"
	"github.com/batchkit/batchkit/trainer/collective/backend"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/batchkit/batchkit/trainer/collective/tcp/internal/tcptest"
	"github.com/google/go-cmp/cmp"
)

// tcpFakeLookups answers as a resolver knowing names (a missing name does
// not exist) and a host with the interface addresses ifaces (CIDR).
func tcpFakeLookups(names map[string][]string, ifaces ...string) hostLookups {
	return hostLookups{
		resolve: func(_ context.Context, host string) ([]net.IPAddr, error) {
			if ip, err := netip.ParseAddr(host); err == nil {
				return []net.IPAddr{{IP: ip.AsSlice(), Zone: ip.Zone()}}, nil
			}
			ips, ok := names[host]
			if !ok {
				return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
			}
			var out []net.IPAddr
			for _, s := range ips {
				out = append(out, net.IPAddr{IP: net.ParseIP(s)})
			}
			return out, nil
		},
		interfaces: func() ([]net.Addr, error) {
			var out []net.Addr
			for _, s := range ifaces {
				ip, n, err := net.ParseCIDR(s)
				if err != nil {
					panic(err)
				}
				n.IP = ip
				out = append(out, n)
			}
			return out, nil
		},
	}
}

// TestCheckMasterAddr: rank 0's verdict on MASTER_ADDR, one row per kind
// of address, against a host with loopback, one IPv4 and one IPv6 address.
func TestCheckMasterAddr(t *testing.T) {
	names := map[string][]string{
		"localhost": {"127.0.0.1", "::1"},
		"node0":     {"10.0.0.1"},
		"node1":     {"10.0.0.2"},
		"multi":     {"10.9.9.9", "10.0.0.1"}, // another host's first, then ours
		"elsewhere": {"10.9.9.9", "fd00::9"},
		"debian":    {"127.0.1.1"}, // Debian's /etc/hosts line for the own name
	}
	host := tcpFakeLookups(names, "127.0.0.1/8", "::1/128", "10.0.0.1/24", "fd00::1/64", "fe80::1/64")
	down := tcpFakeLookups(names)
	down.resolve = func(context.Context, string) ([]net.IPAddr, error) {
		return nil, &net.DNSError{Err: "i/o timeout", Name: "node0", Server: "10.0.0.53:53", IsTimeout: true}
	}
	noIfaces := host
	noIfaces.interfaces = func() ([]net.Addr, error) { return nil, errors.New("netlink: permission denied") }
	const notHere = "MASTER_ADDR=%s resolves to %s, which no interface of this host has: rank 0 must run on MASTER_ADDR's host (this host is 10.0.0.1, fd00::1); if the address reaches this host through NAT, set BATCHKIT_MASTER_ADDR_CHECK=0"
	for _, c := range []struct {
		name, addr string
		lookups    hostLookups
		warning    string
		err        string
	}{
		{name: "own name", addr: "node0", lookups: host},
		{name: "own IPv4", addr: "10.0.0.1", lookups: host},
		{name: "own IPv6", addr: "fd00::1", lookups: host},
		{name: "own IPv4 as IPv6", addr: "::ffff:10.0.0.1", lookups: host},
		{name: "own link-local, zoned", addr: "fe80::1%eth0", lookups: host},
		{name: "several, one ours", addr: "multi", lookups: host},
		{name: "127.0.0.1", addr: "127.0.0.1", lookups: host},
		{name: "localhost", addr: "localhost", lookups: host},
		{name: "::1", addr: "::1", lookups: host},
		{name: "another loopback", addr: "debian", lookups: host},
		{name: "wildcard IPv4", addr: "0.0.0.0", lookups: host},
		{name: "wildcard IPv6", addr: "::", lookups: host},
		{name: "loopback, no interface list", addr: "127.0.0.1", lookups: noIfaces},

		{name: "no such name", addr: "no-such-host.invalid", lookups: host,
			err: "MASTER_ADDR=no-such-host.invalid does not resolve: lookup no-such-host.invalid: no such host"},
		{name: "another host's address", addr: "10.255.255.1", lookups: host,
			err: strings.NewReplacer("%s", "10.255.255.1").Replace(notHere)},
		{name: "another host's name", addr: "node1", lookups: host,
			err: "MASTER_ADDR=node1 resolves to 10.0.0.2, which no interface of this host has: rank 0 must run on MASTER_ADDR's host (this host is 10.0.0.1, fd00::1); if the address reaches this host through NAT, set BATCHKIT_MASTER_ADDR_CHECK=0"},
		{name: "several, none ours", addr: "elsewhere", lookups: host,
			err: "MASTER_ADDR=elsewhere resolves to 10.9.9.9, fd00::9, which no interface of this host has: rank 0 must run on MASTER_ADDR's host (this host is 10.0.0.1, fd00::1); if the address reaches this host through NAT, set BATCHKIT_MASTER_ADDR_CHECK=0"},
		{name: "another host, only loopback here", addr: "node1", lookups: tcpFakeLookups(names, "127.0.0.1/8"),
			err: "MASTER_ADDR=node1 resolves to 10.0.0.2, which no interface of this host has: rank 0 must run on MASTER_ADDR's host; if the address reaches this host through NAT, set BATCHKIT_MASTER_ADDR_CHECK=0"},

		{name: "resolver down", addr: "node0", lookups: down,
			warning: "cannot check MASTER_ADDR=node0: lookup node0 on 10.0.0.53:53: i/o timeout"},
		{name: "no interface list", addr: "node1", lookups: noIfaces,
			warning: "cannot check MASTER_ADDR=node1: this host's addresses: netlink: permission denied"},
	} {
		t.Run(c.name, func(t *testing.T) {
			warning, err := checkMasterAddr(context.Background(), c.addr, c.lookups)
			if diff := cmp.Diff(c.warning, warning); diff != "" {
				t.Errorf("warning (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.err, tcpErrString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			var me *masterAddrError
			if err != nil && !errors.As(err, &me) {
				t.Errorf("got %T, want a *masterAddrError", err)
			}
		})
	}
}

// TestTCPRootBadMasterAddr: rank 0 with a MASTER_ADDR that is not its
// host's fails within seconds, not after its 5-minute rendezvous timeout,
// with the real resolver and this host's real interfaces; turned off, it
// waits as before. A loopback or wildcard MASTER_ADDR forms a world.
func TestTCPRootBadMasterAddr(t *testing.T) {
	if _, err := net.LookupHost("no-such-host.invalid"); notFound(err) == nil {
		t.Skipf("the resolver does not say no-such-host.invalid does not exist: %v", err)
	}
	port := tcptest.FreePort(t)
	for _, c := range []struct {
		name, addr string
		noCheck    bool
		want       string // rank 0's error, a *SetupError
	}{
		{name: "does not resolve", addr: "no-such-host.invalid",
			want: "rendezvous: MASTER_ADDR=no-such-host.invalid does not resolve: lookup no-such-host.invalid"},
		{name: "not this host", addr: "10.255.255.1",
			want: "rendezvous: MASTER_ADDR=10.255.255.1 resolves to 10.255.255.1, which no interface of this host has: rank 0 must run on MASTER_ADDR's host"},
		{name: "check off", addr: "10.255.255.1", noCheck: true,
			want: "rendezvous at 10.255.255.1:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			_, errs := connectRanks(2, port, []int{0}, func(o *Options) {
				o.MasterAddr = c.addr
				o.RendezvousTimeout = 30 * time.Second // the check needs none of it
				o.NoMasterAddrCheck = c.noCheck
				if c.noCheck {
					o.RendezvousTimeout = time.Second
				}
			})
			took := time.Since(start)
			var se *backend.SetupError
			if errs[0] == nil || !strings.HasPrefix(errs[0].Error(), c.want) || (!c.noCheck && !errors.As(errs[0], &se)) {
				t.Errorf("rank 0: got %v (%T), want %q...", errs[0], errs[0], c.want)
			}
			if took > 10*time.Second {
				t.Errorf("rank 0 took %v to fail", took)
			}
			t.Logf("rank 0 failed after %v: %v", took, errs[0])
		})
	}
	for _, addr := range []string{"127.0.0.1", "localhost", "::1", "0.0.0.0"} {
		t.Run("world at "+addr, func(t *testing.T) {
			if addr == "::1" && !tcpHasIPv6Loopback() {
				t.Skip("no ::1 here")
			}
			connectWorld(t, 2, func(o *Options) { o.MasterAddr = addr })
		})
	}
}

func tcpHasIPv6Loopback() bool {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		return false
	}
	l.Close()
	return true
}
