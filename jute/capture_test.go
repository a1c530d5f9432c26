package jute

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// The capture test talks to a real Apache ZooKeeper and records the frames of each exchange under
// testdata/. It runs only when JUTE_CAPTURE_ADDR names a server; it writes files only with -update.
// The server needs extendedTypesEnabled=true for createTTL, which a stock ZooKeeper leaves off.
// zkbench runs one from Debian's zookeeper package in the foreground (Ctrl-C stops it):
//
//	go run ./cmd/zkbench zookeeper -dir /tmp/zk-jute -addr 127.0.0.1:21810 -cfg extendedTypesEnabled=true
//	JUTE_CAPTURE_ADDR=127.0.0.1:21810 go test ./jute -run TestCapture -update    (in another shell)
//
// Without -update it still runs every exchange against the server and checks the replies decode.
// The server should be fresh or at least hold no /jute tree of another run's sessions; the test
// deletes /jute before and after.

var update = flag.Bool("update", false, "rewrite testdata/*.hex from a live ZooKeeper (with JUTE_CAPTURE_ADDR)")

const captureTimeout = 10 * time.Second

// recorder collects the frames of one exchange.
type recorder struct {
	desc   string
	frames []goldenFrame
}

// rawConn is a minimal ZooKeeper client: it writes frames and reads replies in order.
type rawConn struct {
	t   *testing.T
	c   net.Conn
	fr  *FrameReader
	xid int32
	rec *recorder
	sid int64
	pw  []byte
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, captureTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, fr: NewFrameReader(c, 0)}
}

func (rc *rawConn) record(dir byte, kind string, frame []byte) {
	if rc.rec != nil {
		rc.rec.frames = append(rc.rec.frames, goldenFrame{dir: dir, kind: kind, frame: slices.Clone(frame)})
	}
}

func (rc *rawConn) send(kind string, frame []byte) {
	rc.t.Helper()
	rc.record('>', kind, frame)
	if err := rc.c.SetWriteDeadline(time.Now().Add(captureTimeout)); err != nil {
		rc.t.Fatal(err)
	}
	if _, err := rc.c.Write(frame); err != nil {
		rc.t.Fatalf("write %s: %v", kind, err)
	}
}

// recv reads one frame; it returns nil when the server closed the connection.
func (rc *rawConn) recv() []byte {
	rc.t.Helper()
	if err := rc.c.SetReadDeadline(time.Now().Add(captureTimeout)); err != nil {
		rc.t.Fatal(err)
	}
	p, err := rc.fr.Next()
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
		return nil
	}
	if err != nil {
		rc.t.Fatalf("read: %v", err)
	}
	frame := make([]byte, 0, len(p)+FrameHeaderLen)
	frame = append(frame, byte(len(p)>>24), byte(len(p)>>16), byte(len(p)>>8), byte(len(p)))
	return append(frame, p...)
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

func (rc *rawConn) connect(req ConnectRequest) (ConnectResponse, bool) {
	rc.t.Helper()
	rc.send("connect", AppendFrame(nil, &req))
	f := rc.recv()
	if f == nil {
		return ConnectResponse{}, false
	}
	rc.record('<', "connect", f)
	var resp ConnectResponse
	if err := Unmarshal(f[FrameHeaderLen:], 0, &resp); err != nil {
		rc.t.Fatalf("connect response: %v", err)
	}
	rc.sid, rc.pw = resp.SessionID, resp.Passwd
	return resp, true
}

// session opens a new connection and session (with the readOnly byte, as the Java client does).
func session(t *testing.T, addr string) *rawConn {
	t.Helper()
	rc := dialRaw(t, addr)
	resp, ok := rc.connect(ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16), HasReadOnly: true})
	if !ok || resp.SessionID == 0 {
		t.Fatalf("connect: no session (%+v)", resp)
	}
	return rc
}

// callXid sends a request with the given xid and returns its reply. Notifications that arrive
// first are recorded and returned too. closed reports that the server closed the connection.
func (rc *rawConn) callXid(xid int32, op Op, body Record) (h ReplyHeader, resp Record, events []*WatcherEvent, closed bool) {
	rc.t.Helper()
	rc.send(op.String(), AppendRequest(nil, RequestHeader{Xid: xid, Type: op}, body))
	for {
		f := rc.recv()
		if f == nil {
			return h, nil, events, true
		}
		hh, r, err := DecodeReply(f[FrameHeaderLen:], op, 0)
		if err != nil {
			rc.t.Fatalf("%v reply: %v", op, err)
		}
		if hh.Xid == XidNotification {
			rc.record('<', "notification", f)
			events = append(events, r.(*WatcherEvent))
			continue
		}
		rc.record('<', op.String(), f)
		if hh.Xid != xid && !(xid == XidPing && hh.Xid == XidPing) {
			rc.t.Fatalf("%v reply xid %d, want %d", op, hh.Xid, xid)
		}
		return hh, r, events, false
	}
}

func (rc *rawConn) call(op Op, body Record) (ReplyHeader, Record) {
	rc.t.Helper()
	rc.xid++
	h, r, _, closed := rc.callXid(rc.xid, op, body)
	if closed {
		rc.t.Fatalf("%v: connection closed", op)
	}
	return h, r
}

// must runs a request off the record and fails unless it succeeds (or gives one of the codes).
func (rc *rawConn) must(op Op, body Record, ok ...Code) Record {
	rc.t.Helper()
	saved := rc.rec
	rc.rec = nil
	defer func() { rc.rec = saved }()
	h, r := rc.call(op, body)
	if h.Err != CodeOK && !slices.Contains(ok, h.Err) {
		rc.t.Fatalf("%v: %v", op, h.Err)
	}
	return r
}

// deleteTree removes path and everything under it, off the record.
func (rc *rawConn) deleteTree(path string) {
	rc.t.Helper()
	r := rc.must(OpGetChildren, &GetChildrenRequest{Path: path}, CodeNoNode)
	if r == nil {
		return
	}
	for _, c := range r.(*GetChildrenResponse).Children {
		rc.deleteTree(path + "/" + c)
	}
	rc.must(OpDelete, &DeleteRequest{Path: path, Version: -1}, CodeNoNode)
}

var worldAll = []ACL{{Perms: PermAll, ID: Id{Scheme: "world", ID: "anyone"}}}

// exchange is one captured conversation, stored as testdata/<name>.hex.
type exchange struct {
	name string
	desc string
	run  func(t *testing.T, main *rawConn, addr string, rec *recorder)
}

// on records the exchange on the main connection.
func on(main *rawConn, rec *recorder, f func(c *rawConn)) {
	main.rec = rec
	defer func() { main.rec = nil }()
	f(main)
}

// fresh records the exchange on a new connection with its own session.
func fresh(t *testing.T, addr string, rec *recorder, f func(c *rawConn)) {
	t.Helper()
	c := session(t, addr)
	c.rec = rec
	f(c)
}

func simple(name, desc string, op Op, body Record) exchange {
	return exchange{name: name, desc: desc, run: func(t *testing.T, main *rawConn, _ string, rec *recorder) {
		on(main, rec, func(c *rawConn) { c.call(op, body) })
	}}
}

func captureExchanges() []exchange {
	return []exchange{
		{"connect_readonly", "new session, ConnectRequest with the trailing readOnly byte (Java client style)", func(t *testing.T, _ *rawConn, addr string, rec *recorder) {
			c := dialRaw(t, addr)
			c.rec = rec
			c.connect(ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16), HasReadOnly: true})
			c.rec = nil
			c.call(OpCloseSession, nil)
		}},
		{"connect_no_readonly", "new session, ConnectRequest without the readOnly byte (go-zookeeper style)", func(t *testing.T, _ *rawConn, addr string, rec *recorder) {
			c := dialRaw(t, addr)
			c.rec = rec
			c.connect(ConnectRequest{TimeOut: 1000, Passwd: make([]byte, 16)})
			c.rec = nil
			c.call(OpCloseSession, nil)
		}},
		{"connect_unknown_session", "reattach to a session that does not exist: zeroed ConnectResponse, then close", func(t *testing.T, _ *rawConn, addr string, rec *recorder) {
			c := dialRaw(t, addr)
			c.rec = rec
			c.connect(ConnectRequest{TimeOut: 10000, SessionID: 0x7712345678, Passwd: bytes.Repeat([]byte{7}, 16), HasReadOnly: true})
		}},
		{"close_session", "closeSession (header-only request and reply)", func(t *testing.T, _ *rawConn, addr string, rec *recorder) {
			fresh(t, addr, rec, func(c *rawConn) { c.call(OpCloseSession, nil) })
		}},
		{"ping", "ping with xid -2", func(t *testing.T, main *rawConn, _ string, rec *recorder) {
			on(main, rec, func(c *rawConn) { c.callXid(XidPing, OpPing, nil) })
		}},
		simple("create", "create /jute with data and world:anyone ALL", OpCreate,
			&CreateRequest{Path: "/jute", Data: []byte("jute"), ACL: worldAll, Flags: ModePersistent}),
		simple("create_node_exists", "create of an existing node: NodeExists, header-only error reply", OpCreate,
			&CreateRequest{Path: "/jute", Data: []byte("again"), ACL: worldAll, Flags: ModePersistent}),
		simple("create2_ephemeral", "create2 of an ephemeral node: path and stat with the session as owner", OpCreate2,
			&CreateRequest{Path: "/jute/eph", Data: []byte("hello"), ACL: worldAll, Flags: ModeEphemeral}),
		simple("create_sequential", "create of a persistent sequential node", OpCreate,
			&CreateRequest{Path: "/jute/seq-", Data: []byte{}, ACL: worldAll, Flags: ModePersistentSequential}),
		simple("create_null_data", "create with null data (buffer length -1)", OpCreate,
			&CreateRequest{Path: "/jute/null", ACL: worldAll, Flags: ModePersistent}),
		simple("getdata_null", "getData of a node created with null data: the reply keeps null", OpGetData,
			&GetDataRequest{Path: "/jute/null"}),
		simple("create_empty_data", "create with empty data (buffer length 0)", OpCreate2,
			&CreateRequest{Path: "/jute/empty", Data: []byte{}, ACL: worldAll, Flags: ModePersistent}),
		simple("getdata_empty", "getData of a node with empty data", OpGetData,
			&GetDataRequest{Path: "/jute/empty"}),
		simple("create_container", "createContainer (opcode 19)", OpCreateContainer,
			&CreateRequest{Path: "/jute/container", Data: []byte("box"), ACL: worldAll, Flags: ModeContainer}),
		simple("create_ttl", "createTTL (opcode 21) with a one-hour ttl (server has extendedTypesEnabled=true)", OpCreateTTL,
			&CreateTTLRequest{Path: "/jute/ttl", Data: []byte("ttl"), ACL: worldAll, Flags: ModePersistentWithTTL, TTL: 3600000}),
		simple("create_bad_path", "create with an invalid path: BadArguments", OpCreate,
			&CreateRequest{Path: "/jute/", Data: nil, ACL: worldAll, Flags: ModePersistent}),
		simple("getdata", "getData of /jute", OpGetData, &GetDataRequest{Path: "/jute"}),
		simple("getdata_missing", "getData of a missing node: NoNode", OpGetData, &GetDataRequest{Path: "/jute/missing", Watch: true}),
		simple("setdata", "setData of /jute at version 0", OpSetData, &SetDataRequest{Path: "/jute", Data: []byte("jute2"), Version: 0}),
		simple("setdata_bad_version", "setData with a stale version: BadVersion", OpSetData, &SetDataRequest{Path: "/jute", Data: []byte("x"), Version: 0}),
		simple("exists", "exists on /jute", OpExists, &ExistsRequest{Path: "/jute"}),
		simple("exists_missing", "exists with watch on a missing node: NoNode, header-only (the watch is set)", OpExists,
			&ExistsRequest{Path: "/jute/missing", Watch: true}),
		simple("checkwatches", "checkWatches for the exist watch left by exists_missing", OpCheckWatches,
			&CheckWatchesRequest{Path: "/jute/missing", Type: WatcherData}),
		simple("removewatches", "removeWatches of that exist watch", OpRemoveWatches,
			&RemoveWatchesRequest{Path: "/jute/missing", Type: WatcherAny}),
		simple("checkwatches_none", "checkWatches where there is none: NoWatcher", OpCheckWatches,
			&CheckWatchesRequest{Path: "/jute/missing", Type: WatcherChildren}),
		{"setacl", "create /jute/acl, then setACL with two entries", func(t *testing.T, main *rawConn, _ string, rec *recorder) {
			main.must(OpCreate, &CreateRequest{Path: "/jute/acl", ACL: worldAll})
			on(main, rec, func(c *rawConn) {
				c.call(OpSetACL, &SetACLRequest{Path: "/jute/acl", Version: 0, ACL: []ACL{
					{Perms: PermRead, ID: Id{Scheme: "world", ID: "anyone"}},
					{Perms: PermAll, ID: Id{Scheme: "ip", ID: "127.0.0.1"}},
				}})
			})
		}},
		simple("getacl", "getACL of /jute/acl", OpGetACL, &GetACLRequest{Path: "/jute/acl"}),
		simple("getchildren", "getChildren of /jute", OpGetChildren, &GetChildrenRequest{Path: "/jute"}),
		simple("getchildren2", "getChildren2 of /jute (children and the parent's stat)", OpGetChildren2, &GetChildren2Request{Path: "/jute"}),
		simple("sync", "sync of /jute (path echoed)", OpSync, &SyncRequest{Path: "/jute"}),
		{"delete", "delete of a node at any version", func(t *testing.T, main *rawConn, _ string, rec *recorder) {
			main.must(OpCreate, &CreateRequest{Path: "/jute/gone", ACL: worldAll})
			on(main, rec, func(c *rawConn) { c.call(OpDelete, &DeleteRequest{Path: "/jute/gone", Version: -1}) })
		}},
		simple("delete_not_empty", "delete of a node with children: NotEmpty", OpDelete, &DeleteRequest{Path: "/jute", Version: -1}),
		simple("multi", "multi of create, create2, setData, check and delete, all succeeding", OpMulti, &MultiRequest{Ops: []MultiOp{
			{Type: OpCreate, Req: &CreateRequest{Path: "/jute/m", Data: []byte("m"), ACL: worldAll}},
			{Type: OpCreate2, Req: &CreateRequest{Path: "/jute/m/c", Data: []byte("c"), ACL: worldAll}},
			{Type: OpSetData, Req: &SetDataRequest{Path: "/jute/m", Data: []byte("m2"), Version: 0}},
			{Type: OpCheck, Req: &CheckVersionRequest{Path: "/jute/m", Version: 1}},
			{Type: OpDelete, Req: &DeleteRequest{Path: "/jute/m/c", Version: -1}},
		}}),
		simple("multi_failure", "multi whose second op fails: every result is an error (0, BadVersion, RuntimeInconsistency)", OpMulti, &MultiRequest{Ops: []MultiOp{
			{Type: OpCreate, Req: &CreateRequest{Path: "/jute/mf", ACL: worldAll}},
			{Type: OpCheck, Req: &CheckVersionRequest{Path: "/jute", Version: 99}},
			{Type: OpSetData, Req: &SetDataRequest{Path: "/jute", Data: []byte("no"), Version: -1}},
		}}),
		simple("multiread", "multiRead of getChildren, getData and a getData of a missing node", OpMultiRead, &MultiRequest{Ops: []MultiOp{
			{Type: OpGetChildren, Req: &GetChildrenRequest{Path: "/jute/m"}},
			{Type: OpGetData, Req: &GetDataRequest{Path: "/jute"}},
			{Type: OpGetData, Req: &GetDataRequest{Path: "/jute/nope"}},
		}}),
		{"multiread_write", "multiRead holding a write op: MarshallingError, header-only (3.8.0 sends no result list)", func(t *testing.T, _ *rawConn, addr string, rec *recorder) {
			fresh(t, addr, rec, func(c *rawConn) {
				c.call(OpMultiRead, &MultiRequest{Ops: []MultiOp{
					{Type: OpGetData, Req: &GetDataRequest{Path: "/jute"}},
					{Type: OpCreate, Req: &CreateRequest{Path: "/jute/mr", ACL: worldAll}},
				}})
			})
		}},
		simple("addwatch", "addWatch persistent recursive on /jute/pw: the reply has a 4-byte ErrorResponse body", OpAddWatch,
			&AddWatchRequest{Path: "/jute/pw", Mode: AddWatchPersistentRecursive}),
		{"watch_notification", "getData with watch, then setData: the notification (xid -1) precedes the setData reply", func(t *testing.T, main *rawConn, _ string, rec *recorder) {
			main.must(OpCreate, &CreateRequest{Path: "/jute/w", Data: []byte("w0"), ACL: worldAll})
			on(main, rec, func(c *rawConn) {
				c.call(OpGetData, &GetDataRequest{Path: "/jute/w", Watch: true})
				c.xid++
				_, _, events, _ := c.callXid(c.xid, OpSetData, &SetDataRequest{Path: "/jute/w", Data: []byte("w1"), Version: -1})
				if len(events) != 1 {
					t.Errorf("watch_notification: %d events before the setData reply, want 1", len(events))
				}
			})
		}},
		{"setwatches", "setWatches with xid -8 and relativeZxid 0: catch-up notifications, then the reply", func(t *testing.T, main *rawConn, _ string, rec *recorder) {
			on(main, rec, func(c *rawConn) {
				c.callXid(XidSetWatches, OpSetWatches, &SetWatches{
					RelativeZxid: 0,
					DataWatches:  []string{"/jute"},
					ExistWatches: []string{"/jute/w", "/jute/absent"},
					ChildWatches: []string{"/jute/gone"},
				})
			})
		}},
		{"setwatches2", "setWatches2 with persistent watches and null lists", func(t *testing.T, main *rawConn, _ string, rec *recorder) {
			on(main, rec, func(c *rawConn) {
				c.xid++
				c.callXid(c.xid, OpSetWatches2, &SetWatches2{
					RelativeZxid:               1,
					DataWatches:                []string{},
					ExistWatches:               []string{},
					ChildWatches:               []string{},
					PersistentWatches:          []string{"/jute/p"},
					PersistentRecursiveWatches: []string{"/jute/r"},
				})
			})
		}},
		simple("getephemerals", "getEphemerals with prefix /jute", OpGetEphemerals, &GetEphemeralsRequest{PrefixPath: "/jute"}),
		simple("getallchildrennumber", "getAllChildrenNumber of /jute", OpGetAllChildrenNumber, &GetAllChildrenNumberRequest{Path: "/jute"}),
		{"auth", "digest auth with xid -4: the reply echoes the xid, zxid 0", func(t *testing.T, main *rawConn, _ string, rec *recorder) {
			on(main, rec, func(c *rawConn) {
				c.callXid(XidAuth, OpAuth, &AuthPacket{Type: 0, Scheme: "digest", Auth: []byte("alice:secret")})
			})
		}},
		simple("whoami", "whoAmI after digest auth (header-only request)", OpWhoAmI, nil),
		simple("reconfig", "reconfig on a standalone server: ReconfigDisabled", OpReconfig,
			&ReconfigRequest{JoiningServers: "server.2=127.0.0.1:2888:3888", CurConfigID: -1}),
		{"unknown_op", "an unknown opcode (99): Unimplemented, then the server closes the connection", func(t *testing.T, _ *rawConn, addr string, rec *recorder) {
			fresh(t, addr, rec, func(c *rawConn) {
				c.send("op(99)", AppendRequest(nil, RequestHeader{Xid: 1, Type: 99}, nil))
				if f := c.recv(); f != nil {
					c.record('<', "op(99)", f)
				}
			})
		}},
	}
}

func TestCapture(t *testing.T) {
	addr := os.Getenv("JUTE_CAPTURE_ADDR")
	if addr == "" {
		t.Skip("set JUTE_CAPTURE_ADDR to a ZooKeeper address to capture golden frames")
	}
	main := session(t, addr)
	main.deleteTree("/jute")
	for _, ex := range captureExchanges() {
		rec := &recorder{desc: ex.desc}
		ex.run(t, main, addr, rec)
		if t.Failed() {
			t.Fatalf("exchange %s failed", ex.name)
		}
		if len(rec.frames) == 0 {
			t.Fatalf("exchange %s recorded nothing", ex.name)
		}
		for _, f := range rec.frames {
			if err := decodeGolden(f); err != nil {
				t.Errorf("%s: %c %s: %v", ex.name, f.dir, f.kind, err)
			}
		}
		if *update {
			path := filepath.Join("testdata", ex.name+".hex")
			if err := os.WriteFile(path, formatGolden(rec), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	main.rec = nil
	main.deleteTree("/jute")
	main.call(OpCloseSession, nil)
}

func formatGolden(rec *recorder) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n", rec.desc)
	b.WriteString("# captured from Apache ZooKeeper 3.8 by TestCapture (capture_test.go); \"> kind\" is a client frame,\n")
	b.WriteString("# \"< kind\" a server frame, each a whole frame (length prefix included) in hex.\n")
	for _, f := range rec.frames {
		fmt.Fprintf(&b, "%c %s %x\n", f.dir, f.kind, f.frame)
	}
	return b.Bytes()
}
