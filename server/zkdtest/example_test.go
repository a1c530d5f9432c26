package zkdtest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/server"
	"github.com/zkd-io/zkd/server/zkdtest"
)

// In a test, Start gives a real server that stops when the test ends.
func ExampleStart() {
	TestSomething := func(t *testing.T) {
		srv := zkdtest.Start(t) // Raft on, in memory, on 127.0.0.1
		conn, _, err := zk.Connect([]string{srv.Addr()}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Create("/app", []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	_ = TestSomething
}

// Where there is no testing.TB (a TestMain, a benchmark harness), Config gives the same settings
// to start a server with.
func ExampleConfig() {
	srv, err := server.Start(zkdtest.Config())
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer srv.Shutdown(ctx)
	if err := srv.WaitServing(ctx); err != nil {
		fmt.Println(err)
		return
	}
	conn, _, err := zk.Connect([]string{srv.Addr()}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	path, err := conn.Create("/hello", []byte("world"), 0, zk.WorldACL(zk.PermAll))
	fmt.Println(path, err)
	// Output: /hello <nil>
}
