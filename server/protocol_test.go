package server_test

import (
	"bytes"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkd-io/zkd/conformance"
	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/server"
	"github.com/zkd-io/zkd/server/zkdtest"
)

func dialRaw(t *testing.T, addr string) *conformance.Raw {
	t.Helper()
	r, err := conformance.DialRaw(addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func rawSession(t *testing.T, addr string) *conformance.Raw {
	t.Helper()
	r := dialRaw(t, addr)
	if err := r.NewSession(10000); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestHandshakeReadOnlyByteMirrored(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	for _, tc := range []struct {
		hasRO bool
		want  int
	}{{false, 36}, {true, 37}} {
		r := dialRaw(t, s.Addr())
		resp, b, err := r.Handshake(jute.ConnectRequest{TimeOut: 5000, Passwd: make([]byte, 16), HasReadOnly: tc.hasRO})
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != tc.want || resp.SessionID == 0 || len(resp.Passwd) != 16 {
			t.Errorf("readOnly byte sent=%v: response %d bytes, session 0x%x; want %d bytes and a session",
				tc.hasRO, len(b), resp.SessionID, tc.want)
		}
	}
}

func TestHandshakeTimeoutClamped(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft(), zkdtest.WithConfig(func(c *server.Config) {
		c.TickTime = 2 * time.Second
		c.MinSessionTimeout, c.MaxSessionTimeout = 0, 0
	}))
	for _, tc := range []struct{ ask, want int32 }{{1000, 4000}, {100000, 40000}, {10000, 10000}} {
		r := dialRaw(t, s.Addr())
		resp, _, err := r.Handshake(jute.ConnectRequest{TimeOut: tc.ask, Passwd: make([]byte, 16)})
		if err != nil {
			t.Fatal(err)
		}
		if resp.TimeOut != tc.want {
			t.Errorf("asked %d ms: negotiated %d; want %d", tc.ask, resp.TimeOut, tc.want)
		}
	}
}

func TestHandshakeBadSessions(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	first := rawSession(t, s.Addr())
	sess := first.Session

	for name, req := range map[string]jute.ConnectRequest{
		"wrong password": {TimeOut: 5000, SessionID: sess.SessionID, Passwd: make([]byte, 16), HasReadOnly: true},
		"unknown id":     {TimeOut: 5000, SessionID: sess.SessionID + 12345, Passwd: sess.Passwd, HasReadOnly: true},
	} {
		r := dialRaw(t, s.Addr())
		resp, b, err := r.Handshake(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := jute.ConnectResponse{Passwd: make([]byte, 16), HasReadOnly: true}
		if resp.TimeOut != 0 || resp.SessionID != 0 || !bytes.Equal(resp.Passwd, want.Passwd) || len(b) != 37 {
			t.Errorf("%s: response %+v (%d bytes); want the zeroed 37-byte response", name, resp, len(b))
		}
		if err := r.ExpectClosed(3 * time.Second); err != nil {
			t.Errorf("%s: after the zeroed response: %v", name, err)
		}
	}

	// A client that has seen a newer zxid than the server gets no reply at all.
	r := dialRaw(t, s.Addr())
	if err := r.WriteBytes(conformance.Frame(jute.Marshal(nil, &jute.ConnectRequest{LastZxidSeen: 1 << 40, TimeOut: 5000, Passwd: make([]byte, 16)}))); err != nil {
		t.Fatal(err)
	}
	if err := r.ExpectClosed(5 * time.Second); err != nil {
		t.Errorf("client ahead of the server: %v", err)
	}
}

func TestReattachClosesOldConnection(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	old := rawSession(t, s.Addr())
	if _, err := old.Do(jute.OpCreate, &jute.CreateRequest{Path: "/eph", ACL: openACL, Flags: jute.ModeEphemeral}, &jute.CreateResponse{}); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, s.Addr())
	resp, _, err := r.Handshake(jute.ConnectRequest{TimeOut: 6000, SessionID: old.Session.SessionID, Passwd: old.Session.Passwd})
	if err != nil {
		t.Fatal(err)
	}
	if resp.SessionID != old.Session.SessionID || resp.TimeOut != 6000 {
		t.Fatalf("reattach: %+v; want the same session with timeout 6000", resp)
	}
	if err := old.ExpectClosed(3 * time.Second); err != nil {
		t.Errorf("old connection: %v", err)
	}
	var eph jute.GetEphemeralsResponse
	if _, err := r.Do(jute.OpGetEphemerals, &jute.GetEphemeralsRequest{PrefixPath: "/"}, &eph); err != nil {
		t.Fatal(err)
	}
	if len(eph.Ephemerals) != 1 || eph.Ephemerals[0] != "/eph" {
		t.Errorf("getEphemerals after reattach = %v; want [/eph]", eph.Ephemerals)
	}
}

var openACL = []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "world", ID: "anyone"}}}

// The Java client writes ConnectRequest, auth and setWatches in one go before it has the
// ConnectResponse; the server must answer them in order after the handshake.
func TestPipelinedAfterConnect(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	setup := rawSession(t, s.Addr())
	if _, err := setup.Do(jute.OpCreate, &jute.CreateRequest{Path: "/w", ACL: openACL}, &jute.CreateResponse{}); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, s.Addr())
	var batch []byte
	batch = append(batch, conformance.Frame(jute.Marshal(nil, &jute.ConnectRequest{TimeOut: 5000, Passwd: make([]byte, 16), HasReadOnly: true}))...)
	batch = append(batch, conformance.EncodeRequest(jute.XidAuth, jute.OpAuth, &jute.AuthPacket{Scheme: "digest", Auth: []byte("alice:secret")})...)
	batch = append(batch, conformance.EncodeRequest(jute.XidSetWatches, jute.OpSetWatches, &jute.SetWatches{
		RelativeZxid: 0, DataWatches: []string{"/w"}, ExistWatches: []string{"/nope"}})...)
	batch = append(batch, conformance.EncodeRequest(1, jute.OpWhoAmI, nil)...)
	if err := r.WriteBytes(batch); err != nil {
		t.Fatal(err)
	}
	b, err := r.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	var cr jute.ConnectResponse
	if err := jute.Unmarshal(b, 0, &cr); err != nil || cr.SessionID == 0 {
		t.Fatalf("ConnectResponse %+v, %v", cr, err)
	}
	rep, err := r.ReadReplyFor(jute.XidAuth)
	if err != nil || rep.Header.Err != 0 || rep.Header.Zxid != 0 {
		t.Fatalf("auth reply %+v, %v; want xid -4, err 0, zxid 0", rep.Header, err)
	}
	// setWatches: /w changed after zxid 0, so NodeDataChanged comes first, then the reply.
	rep, err = r.ReadReplyFor(jute.XidSetWatches)
	if err != nil || rep.Header.Err != 0 {
		t.Fatalf("setWatches reply %+v, %v", rep.Header, err)
	}
	if len(r.Events) != 1 {
		t.Fatalf("catch-up events = %d; want 1", len(r.Events))
	}
	if ev, _ := r.Events[0].Event(); ev.Type != jute.EventNodeDataChanged || ev.Path != "/w" || r.Events[0].Header.Zxid != -1 {
		t.Errorf("catch-up event %+v zxid %d; want NodeDataChanged /w with zxid -1", ev, r.Events[0].Header.Zxid)
	}
	r.Events = nil
	rep, err = r.ReadReplyFor(1)
	if err != nil {
		t.Fatal(err)
	}
	var who jute.WhoAmIResponse
	if err := rep.Decode(&who); err != nil {
		t.Fatal(err)
	}
	// ZooKeeper lists the ids in java.util.HashSet order; for alice:secret the digest comes first.
	want := []jute.ClientInfo{{AuthScheme: "digest", User: "alice"}, {AuthScheme: "ip", User: "127.0.0.1"}}
	if len(who.ClientInfo) != 2 || who.ClientInfo[0] != want[0] || who.ClientInfo[1] != want[1] {
		t.Errorf("whoAmI = %+v; want %+v", who.ClientInfo, want)
	}
	// The exist watch on /nope was registered: creating it fires NodeCreated.
	if _, err := setup.Do(jute.OpCreate, &jute.CreateRequest{Path: "/nope", ACL: openACL}, &jute.CreateResponse{}); err != nil {
		t.Fatal(err)
	}
	ev, _, err := r.WaitEvent()
	if err != nil || ev.Type != jute.EventNodeCreated || ev.Path != "/nope" {
		t.Errorf("event %+v, %v; want NodeCreated /nope", ev, err)
	}
}

func TestPingAndCloseSession(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	r := rawSession(t, s.Addr())
	// A ping's reply carries xid -2 whatever xid the ping had.
	if err := r.Send(5, jute.OpPing, nil); err != nil {
		t.Fatal(err)
	}
	rep, err := r.ReadReply()
	if err != nil || rep.Header.Xid != jute.XidPing {
		t.Fatalf("ping reply %+v, %v; want xid -2", rep.Header, err)
	}
	// closeSession and a pipelined exists: only the close is answered, then the socket closes.
	batch := append(conformance.EncodeRequest(10, jute.OpCloseSession, nil),
		conformance.EncodeRequest(11, jute.OpExists, &jute.ExistsRequest{Path: "/"})...)
	if err := r.WriteBytes(batch); err != nil {
		t.Fatal(err)
	}
	got, err := r.ReadUntilClosed(3 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Header.Xid != 10 || got[0].Header.Err != 0 {
		t.Fatalf("after closeSession got %d frames (%+v); want only the close reply", len(got), got)
	}
	// The session is gone: reattaching gets the zeroed response.
	r2 := dialRaw(t, s.Addr())
	resp, _, err := r2.Handshake(jute.ConnectRequest{TimeOut: 5000, SessionID: r.Session.SessionID, Passwd: r.Session.Passwd})
	if err != nil || resp.SessionID != 0 {
		t.Errorf("reattach to a closed session: %+v, %v; want the zeroed response", resp, err)
	}
}

func TestUnknownOpAndBadFrames(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft(), zkdtest.WithConfig(func(c *server.Config) { c.MaxFrameSize = 4096 }))

	r := rawSession(t, s.Addr())
	if err := r.Send(3, jute.Op(99), nil); err != nil {
		t.Fatal(err)
	}
	got, err := r.ReadUntilClosed(3 * time.Second)
	if err != nil || len(got) != 1 || got[0].Header.Err != jute.CodeUnimplemented {
		t.Errorf("unknown op: %+v, %v; want one Unimplemented reply, then close", got, err)
	}

	r = rawSession(t, s.Addr())
	if err := r.Send(3, jute.OpCheck, &jute.CheckVersionRequest{Path: "/", Version: 0}); err != nil {
		t.Fatal(err)
	}
	got, err = r.ReadUntilClosed(3 * time.Second)
	if err != nil || len(got) != 1 || got[0].Header.Err != jute.CodeUnimplemented {
		t.Errorf("top-level check: %+v, %v; want one Unimplemented reply, then close", got, err)
	}

	r = rawSession(t, s.Addr())
	if _, err := r.Do(jute.OpSetData, &jute.SetDataRequest{Path: "/", Data: make([]byte, 8192), Version: -1}, nil); err == nil {
		t.Error("a frame above MaxFrameSize was answered")
	}

	// A short body is a MarshallingError; the connection stays usable.
	r = rawSession(t, s.Addr())
	if err := r.WriteBytes(conformance.Frame([]byte{0, 0, 0, 9, 0, 0, 0, byte(jute.OpGetData), 0, 0})); err != nil {
		t.Fatal(err)
	}
	rep, err := r.ReadReplyFor(9)
	if err != nil || rep.Header.Err != jute.CodeMarshallingError {
		t.Errorf("short body: %+v, %v; want MarshallingError", rep.Header, err)
	}
	if _, err := r.Do(jute.OpExists, &jute.ExistsRequest{Path: "/"}, &jute.ExistsResponse{}); err != nil {
		t.Errorf("exists after a bad frame: %v", err)
	}
}

func TestSessionlessConnectionClosed(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft(), zkdtest.WithConfig(func(c *server.Config) { c.SessionlessTimeout = 200 * time.Millisecond }))
	r := dialRaw(t, s.Addr())
	if err := r.ExpectClosed(3 * time.Second); err != nil {
		t.Errorf("silent connection: %v", err)
	}
}

func TestMaxClientConns(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft(), zkdtest.WithConfig(func(c *server.Config) { c.MaxClientConns = 2 }))
	a := rawSession(t, s.Addr())
	rawSession(t, s.Addr())
	third := dialRaw(t, s.Addr())
	if err := third.ExpectClosed(3 * time.Second); err != nil {
		t.Errorf("third connection from one IP: %v", err)
	}
	// Freeing a slot lets a new connection in.
	_ = a.Close()
	testkit.EventuallyNil(t, 5*time.Second, "a connection accepted after one closed", func() error {
		r, err := conformance.DialRaw(s.Addr(), time.Second)
		if err != nil {
			return err
		}
		defer r.Close()
		return r.NewSession(5000)
	})
}

// A client that sends requests but never reads the replies is disconnected once its queued
// output passes MaxOutboundBytes, instead of growing the server's memory without bound.
func TestSlowConsumerDisconnected(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft(), zkdtest.WithConfig(func(c *server.Config) {
		c.MaxFrameSize = 64 << 10
		c.MaxOutboundBytes = 64 << 10
	}))
	w := rawSession(t, s.Addr())
	big := make([]byte, 32<<10)
	if _, err := w.Do(jute.OpCreate, &jute.CreateRequest{Path: "/big", Data: big, ACL: openACL}, &jute.CreateResponse{}); err != nil {
		t.Fatal(err)
	}
	r := rawSession(t, s.Addr())
	before := s.Stats().Connections
	var batch []byte
	for i := range 2000 {
		batch = append(batch, conformance.EncodeRequest(int32(i+1), jute.OpGetData, &jute.GetDataRequest{Path: "/big"})...)
	}
	// 2000 replies of 32 KiB are far beyond the socket buffers and the 64 KiB limit.
	go func() { _ = r.WriteBytes(batch) }()
	testkit.Eventually(t, 20*time.Second, "the slow consumer to be disconnected", func() bool {
		return s.Stats().Connections < before
	})
	// The server keeps serving others.
	if _, err := w.Do(jute.OpExists, &jute.ExistsRequest{Path: "/big"}, &jute.ExistsResponse{}); err != nil {
		t.Errorf("other client after the slow consumer was cut: %v", err)
	}
}

// Reads sent together with nothing else in flight are answered by the reader, which holds their
// replies back while more requests of the burst are already read: every reply must still leave,
// in order, whether the burst ends with a read or with a write.
func TestPipelinedReadBurstsAllAnswered(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	r := rawSession(t, s.Addr())
	mustCreate(t, r, "/b", openACL, 0)
	xid := int32(100)
	for _, n := range []int{1, 2, 5, 50} {
		for _, endWithWrite := range []bool{false, true} {
			var batch []byte
			for i := range n {
				batch = append(batch, conformance.EncodeRequest(xid+int32(i), jute.OpGetData, &jute.GetDataRequest{Path: "/b"})...)
			}
			count := n
			if endWithWrite {
				batch = append(batch, conformance.EncodeRequest(xid+int32(n), jute.OpSetData, &jute.SetDataRequest{Path: "/b", Data: []byte("v"), Version: -1})...)
				count++
			}
			if err := r.WriteBytes(batch); err != nil {
				t.Fatal(err)
			}
			for i := range count {
				if rep, err := r.ReadReplyFor(xid + int32(i)); err != nil || rep.Header.Err != jute.CodeOK {
					t.Fatalf("burst of %d reads (write after: %v), reply %d: %+v, %v", n, endWithWrite, i, rep.Header, err)
				}
			}
			xid += int32(count)
		}
	}
}

// Pipelined requests behave as if executed one by one: a read sees the writes sent before it and
// none sent after it, and replies come back in request order.
func TestPipelinedReadsSeeExactlyEarlierWrites(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	r := rawSession(t, s.Addr())
	mustCreate(t, r, "/x", openACL, 0)
	for round := range 20 {
		var batch []byte
		xid := int32(1000 * (round + 1))
		for i := range 10 {
			v := []byte(fmt.Sprintf("%d-%d", round, i))
			batch = append(batch, conformance.EncodeRequest(xid+int32(2*i), jute.OpSetData, &jute.SetDataRequest{Path: "/x", Data: v, Version: -1})...)
			batch = append(batch, conformance.EncodeRequest(xid+int32(2*i+1), jute.OpGetData, &jute.GetDataRequest{Path: "/x"})...)
		}
		if err := r.WriteBytes(batch); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if rep, err := r.ReadReplyFor(xid + int32(2*i)); err != nil || rep.Header.Err != 0 {
				t.Fatalf("setData %d: %+v %v", i, rep.Header, err)
			}
			rep, err := r.ReadReplyFor(xid + int32(2*i+1))
			if err != nil {
				t.Fatal(err)
			}
			var gd jute.GetDataResponse
			if err := rep.Decode(&gd); err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("%d-%d", round, i); string(gd.Data) != want {
				t.Fatalf("round %d: read %d saw %q; want %q (the write just before it)", round, i, gd.Data, want)
			}
		}
	}
}

// TestCloseSessionAlwaysAnswered closes many sessions at once: every closeSession gets its reply
// before the socket closes, even when the server's housekeeping notices the closed session first.
// Housekeeping runs every 20ms tick, but sessions may keep the 10s they ask for: with the default
// cap of 20 ticks (400ms), a stall of the race-enabled test run could expire a session before its
// closeSession is read, and the server rightly closes an expired session's socket unanswered.
func TestCloseSessionAlwaysAnswered(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft(), zkdtest.WithConfig(func(c *server.Config) {
		c.TickTime = 20 * time.Millisecond
		c.MaxSessionTimeout = 10 * time.Second
	}))
	const workers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range each {
				r, err := conformance.DialRaw(s.Addr(), 5*time.Second)
				if err != nil {
					errs <- err
					return
				}
				if err := r.NewSession(10000); err != nil {
					_ = r.Close()
					errs <- err
					return
				}
				if err := r.Send(1, jute.OpCloseSession, nil); err != nil {
					_ = r.Close()
					errs <- err
					return
				}
				got, err := r.ReadUntilClosed(5 * time.Second)
				_ = r.Close()
				if err != nil {
					errs <- err
					return
				}
				if len(got) != 1 || got[0].Header.Xid != 1 || got[0].Header.Err != 0 {
					errs <- fmt.Errorf("closeSession of 0x%x: got %d replies %+v; want exactly its reply", r.Session.SessionID, len(got), got)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A connection pipelining more requests than Config.MaxInFlight is read no further until one is
// answered, and every request is still answered, in order.
func TestMaxInFlightBoundsAConnection(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft(), zkdtest.WithConfig(func(c *server.Config) { c.MaxInFlight = 2 }))
	r := rawSession(t, s.Addr())
	mustCreate(t, r, "/f", openACL, 0)
	const n = 60
	var batch []byte
	for i := range n {
		if i%3 == 0 {
			batch = append(batch, conformance.EncodeRequest(int32(100+i), jute.OpGetData, &jute.GetDataRequest{Path: "/f"})...)
		} else {
			batch = append(batch, conformance.EncodeRequest(int32(100+i), jute.OpSetData, &jute.SetDataRequest{Path: "/f", Data: []byte{byte(i)}, Version: -1})...)
		}
	}
	if err := r.WriteBytes(batch); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		rep, err := r.ReadReply()
		if err != nil || rep.Header.Xid != int32(100+i) || rep.Header.Err != jute.CodeOK {
			t.Fatalf("reply %d: %+v, %v; want xid %d, OK", i, rep.Header, err, 100+i)
		}
	}
	if got := mntr(t, s.Addr())["zk_max_in_flight_wait_count"]; got == 0 {
		t.Error("max_in_flight_wait_count = 0 after 60 pipelined requests with MaxInFlight 2")
	}
}

// goroutinesIn counts the goroutines whose stack holds fn.
func goroutinesIn(fn string) int {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	n := 0
	for _, g := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}

// An idle connection holds its reader's goroutine and nothing more: the executor runs only while
// it has requests to answer, the writer only while it has replies to write.
func TestIdleConnectionsHoldOnlyTheirReader(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	const n = 20
	for i := range n {
		r := rawSession(t, s.Addr())
		path := fmt.Sprintf("/idle%d", i)
		mustCreate(t, r, path, openACL, 0)
		if _, err := r.Do(jute.OpGetData, &jute.GetDataRequest{Path: path, Watch: true}, &jute.GetDataResponse{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, fn := range []string{"server.(*conn).executor", "server.(*outQueue).writeLoop"} {
		if !testkit.Until(10*time.Second, func() bool { return goroutinesIn(fn) == 0 }) {
			t.Fatalf("%d goroutines in %s for %d idle connections; want none", goroutinesIn(fn), fn, n)
		}
	}
	if got := goroutinesIn("server.(*conn).readLoop"); got != n {
		t.Fatalf("%d readers for %d connections", got, n)
	}
}
