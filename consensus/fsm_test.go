package consensus

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zkd-io/zkd/internal/storage"
	"github.com/zkd-io/zkd/internal/third_party/raft"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

func TestCommandRoundTrip(t *testing.T) {
	c := command{typ: cmdTxn, time: 1700000000123, session: 0x1234, origin: "n1/abc", seq: 99, op: jute.OpSetData,
		auth: []jute.Id{{Scheme: "ip", ID: "127.0.0.1"}, {Scheme: "digest", ID: "u:x"}}, body: []byte{1, 2, 3},
		flags: cmdNoTTL | cmdSASLACL}
	b := c.marshal()
	if len(b) != c.size() || cap(b) != c.size() {
		t.Fatalf("marshal gave %d bytes in a buffer of %d; size() says %d for both", len(b), cap(b), c.size())
	}
	got, err := unmarshalCommand(b)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(c) {
		t.Fatalf("round trip = %+v; want %+v", got, c)
	}
	for _, b := range [][]byte{nil, {1}, c.marshal()[:20], append(c.marshal(), 0)} {
		if _, err := unmarshalCommand(b); !errors.Is(err, errBadCommand) {
			t.Errorf("unmarshalCommand(%d bytes) error = %v; want errBadCommand", len(b), err)
		}
	}
}

func TestUnknownCommandPolicy(t *testing.T) {
	f := newFSM(slog.New(slog.DiscardHandler), "me")
	ign := make([]byte, cmdHeaderSize)
	ign[0] = 0x7f | cmdIgnorable
	ign[1] = 9
	if r := f.Apply(&raft.Log{Index: 5, Type: raft.LogCommand, Data: ign}); r != nil || f.lastZxid.Load() != 0 {
		t.Fatalf("ignorable unknown command applied: %v", r)
	}
	bad := make([]byte, cmdHeaderSize)
	bad[0] = 0x7f
	defer func() {
		if recover() == nil {
			t.Fatalf("unknown non-ignorable command did not stop the FSM")
		}
	}()
	f.Apply(&raft.Log{Index: 6, Type: raft.LogCommand, Data: bad})
}

// randomEntries builds a random but valid-looking sequence of entries over a small name space,
// so that creates, deletes, version checks, sessions and ephemerals interact.
func randomEntries(seed uint64, count int) []*raft.Log {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	paths := []string{"/a", "/b", "/a/x", "/a/y", "/b/z", "/c"}
	var sessions []int64
	var logs []*raft.Log
	for i := range count {
		c := command{typ: cmdTxn, time: int64(1700000000000 + i), origin: "gen", seq: uint64(i)}
		p := paths[rng.IntN(len(paths))]
		switch k := rng.IntN(10); {
		case k == 0:
			id := int64(0x0100000000000000 + i)
			sessions = append(sessions, id)
			c.op = jute.OpCreateSession
			c.body = createSessionBody(znode.CreateSession{ID: id, Timeout: 4000, Passwd: []byte{byte(i)}})
		case k == 1 && len(sessions) > 0:
			c.op = jute.OpCloseSession
			c.body = closeSessionsBody([]int64{sessions[rng.IntN(len(sessions))]})
		case k <= 4:
			c.op = jute.OpCreate
			mode := jute.ModePersistent
			if len(sessions) > 0 && rng.IntN(2) == 0 {
				mode = jute.ModeEphemeral
				c.session = sessions[rng.IntN(len(sessions))]
			}
			if rng.IntN(4) == 0 {
				mode |= jute.ModePersistentSequential
			}
			c.body = jute.Marshal(nil, &jute.CreateRequest{Path: p, Data: []byte{byte(rng.IntN(256))}, ACL: openACL, Flags: mode})
		case k <= 7:
			c.op = jute.OpSetData
			c.body = jute.Marshal(nil, &jute.SetDataRequest{Path: p, Data: []byte{byte(i)}, Version: int32(rng.IntN(3)) - 1})
		default:
			c.op = jute.OpDelete
			c.body = jute.Marshal(nil, &jute.DeleteRequest{Path: p, Version: -1})
		}
		logs = append(logs, &raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: c.marshal()})
	}
	return logs
}

func snapOf(t *testing.T, f *fsm) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := storage.WriteSnapshot(&b, f.view()); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestFSMDeterminism(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		logs := randomEntries(seed, 400)
		one := newFSM(slog.New(slog.DiscardHandler), "a")
		ok := 0
		for _, l := range logs {
			if r, _ := one.Apply(l).(*znode.Result); r != nil && r.Err == nil {
				ok++
			}
		}
		if ok < len(logs)/5 {
			t.Fatalf("seed %d: only %d of %d transactions succeeded; the generator exercises too little", seed, ok, len(logs))
		}
		two := newFSM(slog.New(slog.DiscardHandler), "b")
		for i := 0; i < len(logs); {
			j := min(len(logs), i+1+int(seed)%64)
			if got := two.ApplyBatch(logs[i:j]); len(got) != j-i {
				t.Fatalf("ApplyBatch returned %d responses for %d entries", len(got), j-i)
			}
			i = j
		}
		a, b := snapOf(t, one), snapOf(t, two)
		if !bytes.Equal(a, b) {
			t.Fatalf("seed %d: snapshots differ (%d vs %d bytes)", seed, len(a), len(b))
		}
		if one.lastZxid.Load() != int64(len(logs)) {
			t.Fatalf("seed %d: lastZxid = %d; want %d", seed, one.lastZxid.Load(), len(logs))
		}
		// Snapshot → Restore → the same bytes and zxid.
		three := newFSM(slog.New(slog.DiscardHandler), "c")
		if err := three.Restore(io.NopCloser(bytes.NewReader(a))); err != nil {
			t.Fatal(err)
		}
		if c := snapOf(t, three); !bytes.Equal(a, c) || three.lastZxid.Load() != one.lastZxid.Load() {
			t.Fatalf("seed %d: restore changed the state", seed)
		}
	}
}

func TestRestoreRejectsForeignSnapshot(t *testing.T) {
	f := newFSM(slog.New(slog.DiscardHandler), "a")
	if err := f.Restore(io.NopCloser(bytes.NewReader([]byte("nonsense")))); err == nil {
		t.Fatal("restore accepted a foreign snapshot")
	}
}

// A batch is published once: the apply hook sees every transaction in order, with no view until
// the last, whose view holds them all; only then are the waiters and the proposers told, so no
// writer hears of a change before the server can publish it, and no view is handed on before the
// events of every change it holds were queued.
func TestApplyBatchHookOrder(t *testing.T) {
	logs := randomEntries(5, 60)
	f := newFSM(slog.New(slog.DiscardHandler), "gen") // the generator's origin: every entry is "ours"
	var calls []string
	obs := &funcObserver{}
	f.obs = obs
	obs.apply = func(zxid int64, r *znode.Result, v *znode.View) {
		if r.Zxid != zxid {
			t.Errorf("hook for zxid %d got the result of %d", zxid, r.Zxid)
		}
		z := int64(-1)
		if v != nil {
			z = v.Zxid()
		}
		calls = append(calls, fmt.Sprintf("apply %d view %d", zxid, z))
	}
	obs.deliver = func(seq uint64, c *command, r *znode.Result) {
		if got := f.lastZxid.Load(); got < r.Zxid {
			t.Errorf("result of %d delivered while lastZxid is %d", r.Zxid, got)
		}
		select {
		case <-f.applied.wait(r.Zxid):
		default:
			t.Errorf("result of %d delivered before its waiters were woken", r.Zxid)
		}
		calls = append(calls, fmt.Sprintf("deliver %d", r.Zxid))
	}
	for _, batch := range [][]*raft.Log{logs[:1], logs[1:25], logs[25:]} {
		calls = calls[:0]
		out := f.ApplyBatch(batch)
		var want []string
		first, last := int64(batch[0].Index), int64(batch[len(batch)-1].Index)
		for z := first; z <= last; z++ {
			v := int64(-1)
			if z == last {
				v = last
			}
			want = append(want, fmt.Sprintf("apply %d view %d", z, v))
		}
		for z := first; z <= last; z++ {
			want = append(want, fmt.Sprintf("deliver %d", z))
		}
		if !slices.Equal(calls, want) {
			t.Fatalf("batch %d-%d: hooks ran as\n%v\nwant\n%v", first, last, calls, want)
		}
		if f.view().Zxid() != last || len(out) != len(batch) {
			t.Fatalf("batch %d-%d: tree at %d, %d results", first, last, f.view().Zxid(), len(out))
		}
	}
}

// funcObserver is an fsmObserver that hands applies and deliveries to functions.
type funcObserver struct {
	nopObserver
	apply   func(zxid int64, r *znode.Result, v *znode.View)
	deliver func(seq uint64, c *command, r *znode.Result)
}

func (o *funcObserver) applied(zxid int64, r *znode.Result, v *znode.View) {
	if o.apply != nil {
		o.apply(zxid, r, v)
	}
}

func (o *funcObserver) delivered(seq uint64, c *command, r *znode.Result) {
	if o.deliver != nil {
		o.deliver(seq, c, r)
	}
}
