package zktest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/testkit/apachezk"
)

// launchReady bounds how long Launch and LaunchAt wait for servers to serve: generous, since a
// JVM starting on a loaded machine is slow, and a server that exits ends the wait at once.
const launchReady = 120 * time.Second

// Require skips the test when a real ZooKeeper cannot be started here, saying what is missing.
func Require(t testing.TB) {
	t.Helper()
	if err := Check(); err != nil {
		t.Skip(err)
	}
}

// Launch starts one ZooKeeper server for the test, configured by cfg with nports free loopback
// ports (ports[0] is meant for the client port), and waits until it serves. It skips the test
// when ZooKeeper is not installed. A server that exits before it is ready (another process took
// one of its ports in the meantime) is started again on fresh ports. The server is stopped when
// the test ends.
func Launch(t testing.TB, nports int, cfg func(ports []int) apachezk.ServerConfig) *apachezk.Process {
	t.Helper()
	Require(t)
	for attempt := 1; ; attempt++ {
		ports, err := apachezk.FreePorts(nports)
		if err != nil {
			t.Fatal(err)
		}
		p, err := apachezk.Launch(cfg(ports))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), launchReady)
		err = p.WaitReady(ctx)
		cancel()
		if err == nil {
			t.Cleanup(func() { _ = p.Stop() })
			return p
		}
		_ = p.Stop()
		if exit := (*apachezk.ExitError)(nil); errors.As(err, &exit) && attempt < attempts {
			continue // a port was taken meanwhile
		}
		t.Fatal(err)
	}
}

// LaunchAt starts ZooKeeper servers as cfgs say (on addresses the test chose, such as the
// members of one ensemble), stops them when the test ends, and waits until each serves. It skips
// the test when ZooKeeper is not installed.
func LaunchAt(t testing.TB, cfgs ...apachezk.ServerConfig) []*apachezk.Process {
	t.Helper()
	Require(t)
	procs := make([]*apachezk.Process, len(cfgs))
	for i, cfg := range cfgs {
		p, err := apachezk.Launch(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Stop() })
		procs[i] = p
	}
	ctx, cancel := context.WithTimeout(t.Context(), launchReady)
	defer cancel()
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { errs[i] = p.WaitReady(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return procs
}

// Standalone starts a standalone ZooKeeper for the test (StartZooKeeper in a temporary
// directory) and stops it when the test ends. It skips the test when ZooKeeper is not installed.
func Standalone(t testing.TB) *ZooKeeper {
	t.Helper()
	return started(t, StartZooKeeper)
}

// Ensemble starts a three-server ZooKeeper ensemble for the test (StartEnsemble in a temporary
// directory) and stops it when the test ends. It skips the test when ZooKeeper is not installed.
func Ensemble(t testing.TB) *ZooKeeper {
	t.Helper()
	return started(t, StartEnsemble)
}

func started(t testing.TB, start func(dir string) (*ZooKeeper, error)) *ZooKeeper {
	t.Helper()
	Require(t)
	z, err := start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = z.Stop() })
	return z
}
