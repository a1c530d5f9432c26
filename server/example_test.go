package server_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/server"
)

// Start a standalone in-memory server on a free loopback port and use it with an ordinary
// ZooKeeper client.
func ExampleStart() {
	srv, err := server.Start(server.Config{}) // zero Config: 127.0.0.1:0, in memory
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.WaitServing(ctx); err != nil {
		panic(err)
	}

	conn, _, err := zk.Connect([]string{srv.Addr()}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	if _, err := conn.Create("/hello", []byte("world"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		panic(err)
	}
	data, stat, err := conn.Get("/hello")
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s version=%d\n", data, stat.Version)
	// Output: world version=0
}

// Start a three-server cluster in this process; any member accepts clients and writes.
func ExampleStartCluster() {
	cl, err := server.StartCluster(server.Config{}, 3)
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, s := range cl.Servers {
		if err := s.WaitServing(ctx); err != nil {
			panic(err)
		}
	}

	conn, _, err := zk.Connect(cl.Addrs(), 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	if _, err := conn.Create("/replicated", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		panic(err)
	}
	// go-zookeeper's srvr parser reads each member's mode.
	stats, ok := zk.FLWSrvr(cl.Addrs(), 5*time.Second)
	modes := map[zk.Mode]int{}
	for _, st := range stats {
		modes[st.Mode]++
	}
	fmt.Println(ok, modes[zk.ModeLeader], "leader,", modes[zk.ModeFollower], "followers")
	// Output: true 1 leader, 2 followers
}
