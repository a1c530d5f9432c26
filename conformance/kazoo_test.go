package conformance

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/testkit/pyclient"
)

// TestKazooRecipes runs testdata/kazoo_recipes.py, which drives kazoo's Lock, ReadLock, WriteLock,
// Semaphore and Election recipes with two contending clients, against every target.
func TestKazooRecipes(t *testing.T) {
	py, noKazoo := pyclient.Kazoo()
	runChecks(t, "kazoo", []check{
		{"lock_rwlock_semaphore_election", func(t *testing.T, e *env) {
			if noKazoo != nil {
				t.Skip(noKazoo)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			// Both kazoo clients use the target's first server, as every check's connections do:
			// the script reads one client's writes from the other without a sync, which on a
			// cluster is only guaranteed on the same server (ZooKeeper allows stale follower reads).
			cmd := exec.CommandContext(ctx, py, "testdata/kazoo_recipes.py", e.tg.Addrs[0], e.p("recipes"))
			out, err := cmd.CombinedOutput()
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if err != nil || lines[len(lines)-1] != "ok" {
				t.Fatalf("kazoo recipes (%v):\n%s", err, out)
			}
			for _, want := range []string{"lock:", "rwlock:", "semaphore:", "election:"} {
				if !strings.Contains(string(out), "\n"+want) && !strings.HasPrefix(string(out), want) {
					t.Fatalf("kazoo recipes output lacks the %q step:\n%s", want, out)
				}
			}
		}},
	})
}
