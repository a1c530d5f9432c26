package znode_test

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// The consensus layer applies each committed transaction with its zxid; the server reads from
// views, which stay valid while later transactions are applied.
func Example() {
	tree := znode.New()
	open := []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "world", ID: "anyone"}}}

	tree.Apply(1, &znode.Txn{Op: jute.OpCreateSession, Req: &znode.CreateSession{ID: 0x42, Timeout: 10000}})
	res := tree.Apply(2, &znode.Txn{Time: 1700000000000, Session: 0x42, Op: jute.OpCreate,
		Req: &jute.CreateRequest{Path: "/lock-", Data: []byte("me"), ACL: open, Flags: jute.ModeEphemeralSequential}})
	fmt.Println(res.Resp.(*jute.CreateResponse).Path, res.Events[0].Type, res.Events[1].Type, res.Events[1].Path)

	view := tree.View()
	resp, err := view.Read(0x42, nil, jute.OpGetData, &jute.GetDataRequest{Path: "/lock-0000000000"})
	fmt.Printf("%s %#x %v\n", resp.(*jute.GetDataResponse).Data, resp.(*jute.GetDataResponse).Stat.EphemeralOwner, err)

	res = tree.Apply(3, &znode.Txn{Session: 0x42, Op: jute.OpCloseSession})
	fmt.Println(len(res.Events), tree.View().EphemeralCount(), view.EphemeralCount())

	var snap bytes.Buffer
	_ = tree.View().WriteSnapshot(&snap)
	restored, err := znode.ReadSnapshot(&snap)
	fmt.Println(restored.LastZxid(), restored.View().NodeCount(), err)

	_, err = tree.View().Read(0, nil, jute.OpExists, &jute.ExistsRequest{Path: "/lock-0000000000"})
	fmt.Println(errors.Is(err, znode.ErrNoNode), errors.Is(err, jute.CodeNoNode))
	// Output:
	// /lock-0000000000 NodeCreated NodeChildrenChanged /
	// me 0x42 <nil>
	// 2 0 1
	// 3 5 <nil>
	// true true
}
