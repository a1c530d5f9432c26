package zktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/testkit/apachezk"
)

func TestCheck(t *testing.T) {
	err := Check()
	if (err == nil) != (apachezk.Installed() == nil) {
		t.Fatalf("Check() = %v, but apachezk.Installed() = %v", err, apachezk.Installed())
	}
	if err != nil && !errors.Is(err, ErrNoZooKeeper) {
		t.Fatalf("Check() = %v; want it to wrap ErrNoZooKeeper", err)
	}
	if err != nil {
		if _, serr := StartZooKeeper(t.TempDir()); !errors.Is(serr, ErrNoZooKeeper) {
			t.Fatalf("StartZooKeeper without ZooKeeper = %v; want ErrNoZooKeeper", serr)
		}
	}
}

func flw(t *testing.T, addr, word string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := apachezk.FourLetterWord(ctx, addr, word)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestStartZooKeeperServes(t *testing.T) {
	if err := Check(); err != nil {
		t.Skip(err)
	}
	z, err := StartZooKeeper(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := z.Stop(); err != nil {
			t.Error(err)
		}
	})
	if len(z.Addrs) != 1 || z.Addr() != z.Addrs[0] {
		t.Fatalf("Addrs %v, Addr %q; want one address", z.Addrs, z.Addr())
	}
	if got := flw(t, z.Addrs[0], "ruok"); got != "imok" {
		t.Fatalf("ruok = %q; want imok", got)
	}
	if got := apachezk.Mode(flw(t, z.Addrs[0], "srvr")); got != "standalone" {
		t.Fatalf("mode %q; want standalone", got)
	}
}

func TestStartEnsembleElectsOneLeader(t *testing.T) {
	if err := Check(); err != nil {
		t.Skip(err)
	}
	z, err := StartEnsemble(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := z.Stop(); err != nil {
			t.Error(err)
		}
	})
	modes := map[string]int{}
	for _, a := range z.Addrs {
		modes[apachezk.Mode(flw(t, a, "srvr"))]++
	}
	if len(z.Addrs) != 3 || modes["leader"] != 1 || modes["follower"] != 2 {
		t.Fatalf("%d servers in modes %v; want one leader and two followers", len(z.Addrs), modes)
	}
}
