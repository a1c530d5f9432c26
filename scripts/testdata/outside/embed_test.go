// An outside module's test of zkd as a dependency (scripts/outside.sh copies it into a module of
// its own, outside zkd's tree): a standalone server, the test helpers' server and cluster, and a
// lock from recipes, each serving a real client.
package outside

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/recipes"
	"github.com/zkd-io/zkd/server"
	"github.com/zkd-io/zkd/server/zkdtest"
)

// write creates path on the servers at addrs and reads it back.
func write(t *testing.T, addrs []string, path string) {
	t.Helper()
	conn, _, err := zk.Connect(addrs, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Create(path, []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
	if data, _, err := conn.Get(path); err != nil || string(data) != "v" {
		t.Fatalf("get %s = %q, %v", path, data, err)
	}
}

func TestServerStart(t *testing.T) {
	srv, err := server.Start(server.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer srv.Shutdown(ctx)
	if err := srv.WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
	write(t, []string{srv.Addr()}, "/standalone")
}

func TestZkdtest(t *testing.T) {
	write(t, []string{zkdtest.Start(t).Addr()}, "/zkdtest")
	write(t, zkdtest.StartCluster(t, 3).Addrs(), "/cluster")
}

func TestRecipes(t *testing.T) {
	s, err := recipes.Connect([]string{zkdtest.Start(t).Addr()}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := recipes.NewMutex(s, "/locks/outside").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lease.Token().Czxid <= 0 {
		t.Fatalf("fencing token %+v", lease.Token())
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
