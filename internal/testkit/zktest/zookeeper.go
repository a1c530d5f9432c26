// Package zktest holds test machinery shared by zkd's black-box suites: starting a real Apache
// ZooKeeper (the reference implementation, from Debian's zookeeper package) on loopback through
// internal/testkit/apachezk, so the same tests can run against ZooKeeper and zkd side by side.
//
// It is imported only from _test.go files.
package zktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/zkd-io/zkd/internal/testkit/apachezk"
)

// ErrNoZooKeeper reports that a real ZooKeeper cannot be started here. Errors wrapping it say
// what is missing and how to install it.
var ErrNoZooKeeper = errors.New("zktest: no Apache ZooKeeper here")

// Timeouts for a server to become ready, and retries when a picked port was taken meanwhile.
const (
	standaloneReady = 60 * time.Second
	ensembleReady   = 120 * time.Second
	attempts        = 4
)

// ZooKeeper is a real Apache ZooKeeper started by StartZooKeeper or StartEnsemble.
type ZooKeeper struct {
	// Addrs are the client addresses (host:port), one per server.
	Addrs []string
	procs []*apachezk.Process
}

// Addr returns the servers' client addresses joined with commas, as zk clients accept them.
func (z *ZooKeeper) Addr() string { return strings.Join(z.Addrs, ",") }

// Stop stops the servers (SIGTERM, SIGKILL after 15 s) and waits for them to exit.
func (z *ZooKeeper) Stop() error {
	errs := make([]error, len(z.procs))
	var wg sync.WaitGroup
	for i, p := range z.procs {
		wg.Go(func() { errs[i] = p.Stop() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Check returns nil when a real ZooKeeper can be started here, else an error wrapping
// ErrNoZooKeeper that says what is missing and how to install it.
func Check() error {
	if err := apachezk.Installed(); err != nil {
		return fmt.Errorf("%w: %w", ErrNoZooKeeper, err)
	}
	return nil
}

// Available reports whether a real ZooKeeper can be started here (Check returns nil).
func Available() bool { return Check() == nil }

// StartZooKeeper starts a standalone ZooKeeper with its files under dir on a free loopback port
// and waits until it serves. The caller must Stop it.
func StartZooKeeper(dir string) (*ZooKeeper, error) {
	return start(dir, 1)
}

// StartEnsemble starts three ZooKeeper servers with files under dir/n1..n3 on free loopback
// ports and waits until each is a leader or a follower. The caller must Stop it.
func StartEnsemble(dir string) (*ZooKeeper, error) {
	return start(dir, 3)
}

// start starts n servers (1: standalone) and waits for them, on fresh ports again if a server
// exits before it is ready (another process took one of its ports in the meantime).
func start(dir string, n int) (*ZooKeeper, error) {
	if err := Check(); err != nil {
		return nil, err
	}
	var err error
	for range attempts {
		var z *ZooKeeper
		z, err = launch(dir, n)
		if err == nil {
			return z, nil
		}
		if exit := (*apachezk.ExitError)(nil); !errors.As(err, &exit) {
			return nil, err
		}
	}
	return nil, err
}

// launch makes one attempt at starting n servers.
func launch(dir string, n int) (*ZooKeeper, error) {
	ports, err := apachezk.FreePorts(3 * n)
	if err != nil {
		return nil, err
	}
	var servers []string
	if n > 1 {
		for i := range n {
			servers = append(servers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, ports[n+i], ports[2*n+i]))
		}
	}
	z := &ZooKeeper{}
	for i := range n {
		cfg := apachezk.ServerConfig{Dir: dir, ClientAddr: fmt.Sprintf("127.0.0.1:%d", ports[i]), Servers: servers}
		if n > 1 {
			cfg.Dir, cfg.ID = filepath.Join(dir, fmt.Sprintf("n%d", i+1)), i+1
		}
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			return nil, errors.Join(fmt.Errorf("zktest: %w", err), z.Stop())
		}
		p, err := apachezk.Launch(cfg)
		if err != nil {
			return nil, errors.Join(err, z.Stop())
		}
		z.procs = append(z.procs, p)
		z.Addrs = append(z.Addrs, p.ClientAddr())
	}
	within := standaloneReady
	if n > 1 {
		within = ensembleReady
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, p := range z.procs {
		wg.Go(func() {
			if errs[i] = p.WaitReady(ctx); errs[i] != nil {
				cancel() // a server that exited settles the attempt; the others need not wait
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(err, z.Stop())
	}
	return z, nil
}
