package chaos

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoNetns reports that network namespaces cannot be used here (not root, or no working ip
// netns); the test skips.
var ErrNoNetns = errors.New("chaos: network namespaces unavailable")

// namePattern matches every name this package gives a bridge, namespace or veth:
// cz + kind (b bridge, n namespace, h host-side veth, p namespace-side veth) + the PID of the
// test process + a run letter + the server number.
var namePattern = regexp.MustCompile(`^cz[bnhp]([0-9]+)[a-z][0-9]?$`)

// NetNode is one server's place in the network.
type NetNode struct {
	NS       string // the namespace
	HostVeth string // the veth end in the root namespace, enslaved to the bridge
	PeerVeth string // the veth end inside NS
	IP       string // the server's address, 10.a.b.i
}

// Net is one run's topology: a bridge in the root namespace and one namespace per server. Its
// fault methods are safe for concurrent use.
type Net struct {
	Bridge string
	Subnet string // "10.a.b."
	Nodes  []NetNode

	mu struct {
		sync.Mutex
		blackholes map[[2]int]bool // (in namespace of node i, route to node j)
		down       map[int]bool    // host veths set down
		throttled  map[int]bool    // nodes with tbf qdiscs
	}
}

// ip runs the ip command and returns its error with its output.
func ip(ctx context.Context, args ...string) error {
	return run(ctx, "ip", args...)
}

func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("chaos: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// CheckNetns returns nil when this process can create network namespaces, else an error
// wrapping ErrNoNetns that says why.
func CheckNetns(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: the test must run as root (euid %d)", ErrNoNetns, os.Geteuid())
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%w: %s (iproute2) not found: %w", ErrNoNetns, tool, err)
		}
	}
	pid := os.Getpid()
	ns, br, veth, peer := fmt.Sprintf("czn%dz", pid), fmt.Sprintf("czb%dz", pid), fmt.Sprintf("czh%dz1", pid), fmt.Sprintf("czp%dz1", pid)
	steps := [][]string{
		{"netns", "add", ns},
		{"link", "add", br, "type", "bridge"},
		{"link", "add", veth, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", ns},
	}
	var err error
	for _, s := range steps {
		if err = ip(ctx, s...); err != nil {
			break
		}
	}
	cleanup := errors.Join(ipQuiet(ctx, "link", "del", veth), ipQuiet(ctx, "link", "del", br), ipQuiet(ctx, "netns", "del", ns))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoNetns, err)
	}
	if cleanup != nil {
		return fmt.Errorf("%w: cleaning up the probe: %w", ErrNoNetns, cleanup)
	}
	return nil
}

// ipQuiet runs ip and ignores "does not exist" errors.
func ipQuiet(ctx context.Context, args ...string) error {
	err := ip(ctx, args...)
	if err != nil && (strings.Contains(err.Error(), "Cannot find device") || strings.Contains(err.Error(), "No such file")) {
		return nil
	}
	return err
}

// Sweep deletes the namespaces, bridges and veths that runs of this package in processes that
// are no longer alive left behind, after killing (by PID) whatever still runs inside those
// namespaces. It returns what it removed.
func Sweep(ctx context.Context) ([]string, error) {
	var removed []string
	var errs []error
	nsOut, err := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("chaos: ip netns list: %w", err)
	}
	for line := range strings.SplitSeq(string(nsOut), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !stale(f[0]) {
			continue
		}
		ns := f[0]
		if pids, err := exec.CommandContext(ctx, "ip", "netns", "pids", ns).Output(); err == nil {
			for p := range strings.FieldsSeq(string(pids)) {
				if pid, err := strconv.Atoi(p); err == nil && pid > 1 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if err := ip(ctx, "netns", "del", ns); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, "netns "+ns)
	}
	linkOut, err := exec.CommandContext(ctx, "ip", "-o", "link", "show").Output()
	if err != nil {
		return removed, fmt.Errorf("chaos: ip link show: %w", err)
	}
	for line := range strings.SplitSeq(string(linkOut), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if !stale(name) {
			continue
		}
		if err := ip(ctx, "link", "del", name); err != nil {
			// The peer of a veth deleted a moment ago is gone with it.
			if !strings.Contains(err.Error(), "Cannot find device") {
				errs = append(errs, err)
			}
			continue
		}
		removed = append(removed, "link "+name)
	}
	return removed, errors.Join(errs...)
}

// stale reports whether name is one of ours whose owning process no longer runs.
func stale(name string) bool {
	m := namePattern.FindStringSubmatch(name)
	if m == nil {
		return false
	}
	pid, err := strconv.Atoi(m[1])
	if err != nil || pid <= 0 {
		return false
	}
	if pid == os.Getpid() {
		return false
	}
	return !alive(pid)
}

// alive reports whether a process with this PID exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// pickSubnet returns a 10.a.b. prefix that no address or route of the root namespace uses,
// starting from a point derived from the PID and run number so that concurrent runs start apart.
func pickSubnet(ctx context.Context, run int) (string, error) {
	addrs, err := exec.CommandContext(ctx, "ip", "-4", "-o", "addr", "show").Output()
	if err != nil {
		return "", fmt.Errorf("chaos: ip addr show: %w", err)
	}
	routes, err := exec.CommandContext(ctx, "ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return "", fmt.Errorf("chaos: ip route show: %w", err)
	}
	used := string(addrs) + "\n" + string(routes)
	h := fnv.New32a()
	fmt.Fprintf(h, "%d/%d", os.Getpid(), run)
	start := h.Sum32()
	// 10.64.0.0 - 10.191.255.0: 32768 /24s.
	for i := range uint32(32768) {
		n := (start + i) % 32768
		prefix := fmt.Sprintf("10.%d.%d.", 64+n/256, n%256)
		if !strings.Contains(used, " "+prefix) {
			return prefix, nil
		}
	}
	return "", errors.New("chaos: no free 10.x.y.0/24")
}

// NewNet creates the topology for run number run (0-25) with n servers. Close removes it.
func NewNet(ctx context.Context, run, n int) (_ *Net, err error) {
	if run < 0 || run > 25 || n < 1 || n > 9 {
		return nil, fmt.Errorf("chaos: NewNet(run %d, %d servers) out of range", run, n)
	}
	subnet, err := pickSubnet(ctx, run)
	if err != nil {
		return nil, err
	}
	tag := fmt.Sprintf("%d%c", os.Getpid(), 'a'+run)
	nt := &Net{Bridge: "czb" + tag, Subnet: subnet}
	nt.mu.blackholes = map[[2]int]bool{}
	nt.mu.down = map[int]bool{}
	nt.mu.throttled = map[int]bool{}
	for i := 1; i <= n; i++ {
		nt.Nodes = append(nt.Nodes, NetNode{
			NS:       fmt.Sprintf("czn%s%d", tag, i),
			HostVeth: fmt.Sprintf("czh%s%d", tag, i),
			PeerVeth: fmt.Sprintf("czp%s%d", tag, i),
			IP:       fmt.Sprintf("%s%d", subnet, i),
		})
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, nt.Close())
		}
	}()
	steps := [][]string{
		{"link", "add", nt.Bridge, "type", "bridge"},
		{"addr", "add", subnet + "254/24", "dev", nt.Bridge},
		{"link", "set", nt.Bridge, "up"},
	}
	for _, nd := range nt.Nodes {
		steps = append(steps,
			[]string{"netns", "add", nd.NS},
			[]string{"link", "add", nd.HostVeth, "type", "veth", "peer", "name", nd.PeerVeth},
			[]string{"link", "set", nd.PeerVeth, "netns", nd.NS},
			[]string{"link", "set", nd.HostVeth, "master", nt.Bridge},
			[]string{"link", "set", nd.HostVeth, "up"},
			[]string{"-n", nd.NS, "addr", "add", nd.IP + "/24", "dev", nd.PeerVeth},
			[]string{"-n", nd.NS, "link", "set", nd.PeerVeth, "up"},
			[]string{"-n", nd.NS, "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if err := ip(ctx, s...); err != nil {
			return nil, err
		}
	}
	return nt, nil
}

// Close deletes the bridge, the veths and the namespaces. Processes must have been stopped.
func (nt *Net) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, nd := range nt.Nodes {
		if err := ip(ctx, "link", "del", nd.HostVeth); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
			errs = append(errs, err)
		}
		if err := ip(ctx, "netns", "del", nd.NS); err != nil && !strings.Contains(err.Error(), "No such file") {
			errs = append(errs, err)
		}
	}
	if err := ip(ctx, "link", "del", nt.Bridge); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Partition cuts node k (0-based) off every other node in both directions with blackhole
// routes. Clients in the root namespace still reach it.
func (nt *Net) Partition(ctx context.Context, k int) error {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	for j := range nt.Nodes {
		if j == k {
			continue
		}
		for _, p := range [][2]int{{k, j}, {j, k}} {
			if nt.mu.blackholes[p] {
				continue
			}
			if err := ip(ctx, "-n", nt.Nodes[p[0]].NS, "route", "add", "blackhole", nt.Nodes[p[1]].IP+"/32"); err != nil {
				return err
			}
			nt.mu.blackholes[p] = true
		}
	}
	return nil
}

// Isolate sets node k's veth down: nothing reaches it, clients included.
func (nt *Net) Isolate(ctx context.Context, k int) error {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	if err := ip(ctx, "link", "set", nt.Nodes[k].HostVeth, "down"); err != nil {
		return err
	}
	nt.mu.down[k] = true
	return nil
}

// Throttle limits node k's link in both directions to 256 kbit/s with a token bucket.
func (nt *Net) Throttle(ctx context.Context, k int) error {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	tbf := []string{"root", "tbf", "rate", "256kbit", "burst", "16kb", "latency", "200ms"}
	nd := nt.Nodes[k]
	nt.mu.throttled[k] = true
	if err := run(ctx, "tc", append([]string{"qdisc", "add", "dev", nd.HostVeth}, tbf...)...); err != nil {
		return err
	}
	return run(ctx, "ip", append([]string{"netns", "exec", nd.NS, "tc", "qdisc", "add", "dev", nd.PeerVeth}, tbf...)...)
}

// Heal undoes every partition, isolation and throttle.
func (nt *Net) Heal(ctx context.Context) error {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	var errs []error
	for p := range nt.mu.blackholes {
		if err := ip(ctx, "-n", nt.Nodes[p[0]].NS, "route", "del", "blackhole", nt.Nodes[p[1]].IP+"/32"); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(nt.mu.blackholes, p)
	}
	for k := range nt.mu.down {
		if err := ip(ctx, "link", "set", nt.Nodes[k].HostVeth, "up"); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(nt.mu.down, k)
	}
	for k := range nt.mu.throttled {
		nd := nt.Nodes[k]
		e1 := run(ctx, "tc", "qdisc", "del", "dev", nd.HostVeth, "root")
		e2 := run(ctx, "ip", "netns", "exec", nd.NS, "tc", "qdisc", "del", "dev", nd.PeerVeth, "root")
		for _, e := range []error{e1, e2} {
			if e != nil && !strings.Contains(e.Error(), "No such file") && !strings.Contains(e.Error(), "Cannot delete qdisc with handle of zero") {
				errs = append(errs, e)
			}
		}
		delete(nt.mu.throttled, k)
	}
	return errors.Join(errs...)
}
