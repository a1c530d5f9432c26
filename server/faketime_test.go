package server_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkd-io/zkd/conformance"
	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/server"
	"github.com/zkd-io/zkd/server/zkdtest"
)

// pipeListener hands out net.Pipe connections: inside a testing/synctest bubble, a server on it
// and its clients block only on the bubble's channels and timers, so the bubble's clock runs.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial connects a client: it returns the client's end once the server accepted the other.
func (l *pipeListener) dial(t *testing.T) *conformance.Raw {
	t.Helper()
	srv, cli := net.Pipe()
	select {
	case l.conns <- srv:
	case <-l.done:
		t.Fatal("dial: listener closed")
	}
	r := conformance.NewRaw(cli, 30*time.Second)
	t.Cleanup(func() { r.Close() })
	return r
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// startFake starts a server without Raft on a pipe listener, in the calling synctest bubble.
func startFake(t *testing.T, tweak func(*server.Config)) *pipeListener {
	t.Helper()
	ln, _ := startFakeServer(t, tweak)
	return ln
}

// startFakeServer is startFake, also returning the server.
func startFakeServer(t *testing.T, tweak func(*server.Config)) (*pipeListener, *server.Server) {
	t.Helper()
	ln := newPipeListener()
	s, err := zkdtest.StartServer(zkdtest.WithoutRaft(), zkdtest.WithConfig(func(c *server.Config) {
		*c = server.Config{Listener: ln, TickTime: 2 * time.Second, MaxSessionTimeout: time.Minute}
		if tweak != nil {
			tweak(c)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return ln, s
}

// A session lives as long as its client pings, and once the client falls silent it ends after its
// timeout, to the tick: the server closes the connection, the session's ephemeral is deleted and a
// watcher is told. The clock is testing/synctest's, so the minute this takes costs no real time.
func TestSilentSessionExpiresOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := startFake(t, nil)
		owner := ln.dial(t)
		if err := owner.NewSession(6000); err != nil {
			t.Fatal(err)
		}
		if owner.Session.TimeOut != 6000 {
			t.Fatalf("negotiated %dms; want 6000", owner.Session.TimeOut)
		}
		mustCreate(t, owner, "/e", openACL, jute.ModeEphemeral)
		watcher := ln.dial(t)
		if err := watcher.NewSession(60000); err != nil {
			t.Fatal(err)
		}
		if _, err := watcher.Do(jute.OpExists, &jute.ExistsRequest{Path: "/e", Watch: true}, &jute.ExistsResponse{}); err != nil {
			t.Fatal(err)
		}
		// Pinged every 2s for 30s: alive.
		for range 15 {
			time.Sleep(2 * time.Second) // the bubble's fake clock (synctest): no real time passes
			if err := owner.Send(jute.XidPing, jute.OpPing, nil); err != nil {
				t.Fatal(err)
			}
			if rep, err := owner.ReadReply(); err != nil || rep.Header.Xid != jute.XidPing {
				t.Fatalf("ping at %v: %+v, %v", time.Now(), rep.Header, err)
			}
		}
		silentSince := time.Now()
		// Silent: the watcher hears of the deletion after the timeout, and not before.
		ev, _, err := watcher.WaitEvent()
		if err != nil {
			t.Fatal(err)
		}
		after := time.Since(silentSince)
		if ev.Type != jute.EventNodeDeleted || ev.Path != "/e" {
			t.Fatalf("event %+v; want NodeDeleted /e", ev)
		}
		if after < 6*time.Second || after > 6*time.Second+2*time.Second {
			t.Fatalf("session ended %v after its client fell silent; want its 6s timeout, within a tick", after)
		}
		if err := owner.ExpectClosed(time.Second); err != nil {
			t.Fatalf("the silent client's connection: %v; want closed", err)
		}
	})
}

// A client that never pauses keeps its session and its connection however its requests come: the
// server touches a session at most once a millisecond, and renews a connection's read deadline
// only when it has to read from the socket, not for a request the client pipelined. Here bursts of
// three pipelined requests come 0.7ms apart, so both savings are taken, for four times the
// session's timeout. Once the client falls silent, the connection ends after the timeout.
func TestBusySessionStaysAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := startFake(t, func(c *server.Config) { c.TickTime = 100 * time.Millisecond })
		cl := ln.dial(t)
		if err := cl.NewSession(400); err != nil {
			t.Fatal(err)
		}
		if cl.Session.TimeOut != 400 {
			t.Fatalf("negotiated %dms; want 400", cl.Session.TimeOut)
		}
		mustCreate(t, cl, "/e", openACL, jute.ModeEphemeral)
		for end := time.Now().Add(1600 * time.Millisecond); time.Now().Before(end); {
			time.Sleep(700 * time.Microsecond) // the bubble's fake clock (synctest): the spacing under test
			var burst []byte
			for range 3 {
				burst = append(burst, conformance.EncodeRequest(cl.NextXid(), jute.OpExists, &jute.ExistsRequest{Path: "/e"})...)
			}
			if err := cl.WriteBytes(burst); err != nil {
				t.Fatalf("at %v: %v", time.Now(), err)
			}
			for range 3 {
				if rep, err := cl.ReadReply(); err != nil || rep.Header.Err != jute.CodeOK {
					t.Fatalf("at %v: %+v, %v", time.Now(), rep.Header, err)
				}
			}
		}
		silentSince := time.Now()
		if err := cl.ExpectClosed(time.Second); err != nil {
			t.Fatalf("the silent client's connection: %v; want closed", err)
		}
		if after := time.Since(silentSince); after < 390*time.Millisecond || after > 600*time.Millisecond {
			t.Fatalf("the connection ended %v after its client fell silent; want its 400ms timeout, within two ticks", after)
		}
	})
}

// A read sent after a watch event sees the change the event is about, even when the event reached
// the client before the server published the view with the change (the apply hook queues events,
// then publishes; a connection's writer may send them in between). The hook is held between the
// two until the client has the event and has sent its read; the read must wait for the view.
func TestReadAfterEventSeesTheChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln, s := startFakeServer(t, nil)
		watcher, writer := ln.dial(t), ln.dial(t)
		for _, c := range []*conformance.Raw{watcher, writer} {
			if err := c.NewSession(30000); err != nil {
				t.Fatal(err)
			}
		}
		mustCreate(t, writer, "/n", openACL, jute.ModePersistent)
		if _, err := watcher.Do(jute.OpGetData, &jute.GetDataRequest{Path: "/n", Watch: true}, &jute.GetDataResponse{}); err != nil {
			t.Fatal(err)
		}
		held, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		server.SetAfterFire(s, func(int64) {
			once.Do(func() {
				close(held)
				<-release
			})
		})
		if err := writer.Send(writer.NextXid(), jute.OpSetData, &jute.SetDataRequest{Path: "/n", Data: []byte("new"), Version: -1}); err != nil {
			t.Fatal(err)
		}
		<-held
		ev, _, err := watcher.WaitEvent()
		if err != nil || ev.Type != jute.EventNodeDataChanged {
			t.Fatalf("event %+v, %v; want NodeDataChanged", ev, err)
		}
		xid := watcher.NextXid()
		if err := watcher.Send(xid, jute.OpGetData, &jute.GetDataRequest{Path: "/n"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the server has read the request and answered it, or is waiting to
		close(release)
		rep, err := watcher.ReadReplyFor(xid)
		if err != nil {
			t.Fatal(err)
		}
		var got jute.GetDataResponse
		if err := rep.Decode(&got); err != nil {
			t.Fatal(err)
		}
		if string(got.Data) != "new" {
			t.Fatalf("getData after the event read %q; want the changed data %q", got.Data, "new")
		}
	})
}
