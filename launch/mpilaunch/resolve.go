package mpilaunch

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/batchkit/batchkit/launch"
	"github.com/batchkit/batchkit/mpirun"
)

// overSSH reports whether the launcher reaches the hosts by ssh (or rsh):
// outside an allocation, with no bootstrap through a scheduler.
func overSSH(spec mpirun.Spec) bool {
	return !spec.InAllocation && spec.Launcher != mpirun.ProgramSrun &&
		(spec.Bootstrap == "" || spec.Bootstrap == "ssh" || spec.Bootstrap == "rsh")
}

// checkResolve refuses hosts named by --hosts or --hostfile that do not
// resolve, when the launcher is to reach them by ssh. Hydra prints ssh's
// "Could not resolve hostname" and then waits for ever (MPICH 4.0's
// mpiexec); other launchers fail, but further from the cause. A name only
// ssh knows (a Host alias in ~/.ssh/config) needs --no-host-check.
func checkResolve(o Options, spec mpirun.Spec, hosts []mpirun.Host, resolve func(string) error) error {
	if o.NoHostCheck || (o.Hosts == "" && o.Hostfile == "") || !overSSH(spec) || resolve == nil {
		return nil
	}
	var names []string
	for _, h := range hosts {
		if !slices.Contains(names, h.Name) {
			names = append(names, h.Name)
		}
	}
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = resolve(name) }()
	}
	wg.Wait()
	from := "--hosts"
	if o.Hostfile != "" {
		from = "--hostfile " + o.Hostfile
	}
	for i, err := range errs {
		if err != nil {
			return launch.Invalid("host %q (%s) does not resolve: %v; the launcher reaches it by ssh "+
				"(a name only ssh knows, a Host alias: pass --no-host-check)", names[i], from, err)
		}
	}
	return nil
}

// ResolveTimeout bounds one host's lookup: a dead DNS server would
// otherwise hold the launch for its resolver's full retry cycle.
const ResolveTimeout = 5 * time.Second

// ResolveHost is Machine.Resolve on a real machine: the system resolver
// (/etc/hosts, DNS), within ResolveTimeout.
func ResolveHost(host string) error {
	ctx, cancel := context.WithTimeout(context.Background(), ResolveTimeout)
	defer cancel()
	_, err := net.DefaultResolver.LookupHost(ctx, host)
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return errors.New(dns.Err) // "no such host", without the resolver's address
	}
	return err
}
