package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// fifoTree builds a session's directory with the given applied writes: n → czxid.
func fifoTree(s *FIFOSession, applied map[int]int64) Dump {
	d := Dump{"/": {Path: "/"}, s.Dir: {Path: s.Dir, Stat: jute.Stat{Czxid: 1, Mzxid: 1}}}
	for n, czxid := range applied {
		p := fmt.Sprintf("%s/n-%010d", s.Dir, czxid)
		d[p] = Node{Path: p, Data: fmt.Appendf(nil, "%d:%d", s.Writes[n].Epoch, n), Stat: jute.Stat{Czxid: czxid, Mzxid: czxid}}
	}
	return d
}

// fifoSession builds a session of writes (epoch, outcome); OK writes are acknowledged at the
// path fifoTree gives czxid 100+n.
func fifoSessionOf(writes ...FIFOWrite) *FIFOSession {
	s := &FIFOSession{Name: "f0.0", Dir: "/fifo/f0.0", Writes: writes}
	for n := range s.Writes {
		if s.Writes[n].Outcome == OK {
			s.Writes[n].Path = fmt.Sprintf("%s/n-%010d", s.Dir, 100+n)
			s.Writes[n].Zxid = int64(100 + n)
		}
	}
	return s
}

func wantViolations(t *testing.T, got []Violation, want ...string) {
	t.Helper()
	if len(want) == 0 {
		for _, v := range got {
			t.Errorf("unexpected violation: %v", v)
		}
		return
	}
	if len(got) == 0 {
		t.Fatalf("no violation; want one mentioning %q", want)
	}
	all := fmt.Sprint(got)
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("violations %v do not mention %q", got, w)
		}
	}
}

func TestCheckFIFO(t *testing.T) {
	ok := func(e int) FIFOWrite { return FIFOWrite{Epoch: e, Outcome: OK} }
	unk := func(e int) FIFOWrite { return FIFOWrite{Epoch: e, Outcome: Unknown} }
	failed := func(e int) FIFOWrite { return FIFOWrite{Epoch: e, Outcome: Failed, Code: jute.CodeSessionMoved} }
	tests := []struct {
		name    string
		writes  []FIFOWrite
		applied map[int]int64
		want    []string // substrings of the violations; none for a legitimate history
	}{
		{
			name:    "legitimate: unknown writes at an epoch's end, applied or not",
			writes:  []FIFOWrite{ok(0), ok(0), unk(0), unk(0), unk(0), ok(1), unk(1)},
			applied: map[int]int64{0: 100, 1: 101, 2: 102, 5: 105},
		},
		{
			name:    "legitimate: a failed write in the middle of an epoch",
			writes:  []FIFOWrite{ok(0), failed(0), ok(0)},
			applied: map[int]int64{0: 100, 2: 102},
		},
		{
			name:    "gap: unknown writes missing before a later applied write of the same epoch",
			writes:  []FIFOWrite{ok(0), unk(0), unk(0), unk(0), unk(0), ok(1)},
			applied: map[int]int64{0: 100, 4: 104, 5: 105},
			want:    []string{"gap in epoch 0 (server 1): writes 1..3 (3 never applied: 3 without a reply, 0 acknowledged) are missing, yet write 4 sent after them"},
		},
		{
			name:    "acknowledged write lost",
			writes:  []FIFOWrite{ok(0), ok(0), ok(0)},
			applied: map[int]int64{0: 100, 2: 102},
			want:    []string{"acknowledged write lost: write 1 of epoch 0"},
		},
		{
			name:    "an older epoch's write applied after a newer epoch's",
			writes:  []FIFOWrite{ok(0), unk(0), ok(1)},
			applied: map[int]int64{0: 100, 1: 110, 2: 102},
			want:    []string{"write 2 (epoch 1", "applied before write 1 sent earlier (epoch 0"},
		},
		{
			name:    "a failed write applied",
			writes:  []FIFOWrite{ok(0), failed(0)},
			applied: map[int]int64{0: 100, 1: 101},
			want:    []string{"write 1 of epoch 0 failed with"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fifoSessionOf(tt.writes...)
			wantViolations(t, checkFIFO(s, fifoTree(s, tt.applied)), tt.want...)
		})
	}
	t.Run("applied twice", func(t *testing.T) {
		s := fifoSessionOf(ok(0), unk(0))
		d := fifoTree(s, map[int]int64{0: 100, 1: 101})
		d["/fifo/f0.0/n-0000000200"] = Node{Path: "/fifo/f0.0/n-0000000200", Data: []byte("0:1"), Stat: jute.Stat{Czxid: 200}}
		wantViolations(t, checkFIFO(s, d), "write 1 (epoch 0) applied twice")
	})
	t.Run("a node the session never sent", func(t *testing.T) {
		s := fifoSessionOf(ok(0))
		d := fifoTree(s, map[int]int64{0: 100})
		d["/fifo/f0.0/n-0000000300"] = Node{Path: "/fifo/f0.0/n-0000000300", Data: []byte("0:7"), Stat: jute.Stat{Czxid: 300}}
		wantViolations(t, checkFIFO(s, d), "never sent")
	})
}

// sessionTree is a tree with a session's marker parent (pzxid = its close) and its FIFO nodes.
func sessionTree(closeZxid int64, markerAlive bool, czxids ...int64) Dump {
	d := Dump{
		"/":             {Path: "/"},
		"/markers/s1":   {Path: "/markers/s1", Stat: jute.Stat{Czxid: 10, Mzxid: 10, Pzxid: closeZxid}},
		"/fifo/s1":      {Path: "/fifo/s1", Stat: jute.Stat{Czxid: 11, Mzxid: 11}},
		"/reg/r0":       {Path: "/reg/r0", Data: []byte("s1:3"), Stat: jute.Stat{Czxid: 2, Mzxid: 40, Version: 3}},
		"/markers/s2":   {Path: "/markers/s2", Stat: jute.Stat{Czxid: 12, Mzxid: 12, Pzxid: 13}},
		"/markers/s2/m": {Path: "/markers/s2/m", Stat: jute.Stat{Czxid: 13, Mzxid: 13, EphemeralOwner: 0x22}},
	}
	if markerAlive {
		d["/markers/s1/m"] = Node{Path: "/markers/s1/m", Stat: jute.Stat{Czxid: 12, Mzxid: 12, EphemeralOwner: 0x11}}
	}
	for i, z := range czxids {
		p := fmt.Sprintf("/fifo/s1/n-%010d", i)
		d[p] = Node{Path: p, Data: fmt.Appendf(nil, "0:%d", i), Stat: jute.Stat{Czxid: z, Mzxid: z}}
	}
	return d
}

func TestCheckSessionEnd(t *testing.T) {
	rec := func(closeZxid int64, acked ...AckedWrite) []*SessionRecord {
		return []*SessionRecord{
			{Name: "s1", Kind: "fifo", ID: 0x11, Marker: "/markers/s1/m", End: EndClosed, CloseZxid: closeZxid,
				Owns: []string{"/fifo/s1", "/markers/s1"}, Acked: acked},
			{Name: "s2", Kind: "register", ID: 0x22, Marker: "/markers/s2/m"},
		}
	}
	attributed := []string{"/reg/r0"}
	t.Run("legitimate", func(t *testing.T) {
		wantViolations(t, checkSessionEnd(rec(50, AckedWrite{"set /reg/r0", 40}), sessionTree(50, false, 20, 30), attributed))
	})
	t.Run("marker alive: not checked", func(t *testing.T) {
		wantViolations(t, checkSessionEnd(rec(0), sessionTree(12, true, 20, 300), attributed))
	})
	t.Run("a create after the close", func(t *testing.T) {
		wantViolations(t, checkSessionEnd(rec(0), sessionTree(50, false, 20, 83), attributed),
			"session s1 (0x11, fifo, closed): it ended at zxid 0x32 but /fifo/s1/n-0000000001 has czxid 0x53")
	})
	t.Run("an acknowledged write after the close", func(t *testing.T) {
		wantViolations(t, checkSessionEnd(rec(0, AckedWrite{"create /fifo/s1/x", 60}), sessionTree(50, false, 20), attributed),
			"its write create /fifo/s1/x was acknowledged at zxid 0x3c")
	})
	t.Run("a register last set after the close", func(t *testing.T) {
		wantViolations(t, checkSessionEnd(rec(0), sessionTree(35, false, 20), attributed),
			"/reg/r0 was last set by it at mzxid 0x28")
	})
	t.Run("closeSession zxid is not the marker's deletion", func(t *testing.T) {
		wantViolations(t, checkSessionEnd(rec(49), sessionTree(50, false, 20), attributed),
			"closeSession was answered at zxid 0x31 but the marker was deleted at zxid 0x32")
	})
}

func TestCheckEphemerals(t *testing.T) {
	d := sessionTree(12, true)
	wantViolations(t, checkEphemerals(map[int64]string{0x33: "lock l0.0"}, d))
	wantViolations(t, checkEphemerals(map[int64]string{0x11: "fifo s1"}, d), "/markers/s1/m (czxid 0xc) is still owned by session 0x11 (fifo s1)")
}

func TestCheckFencing(t *testing.T) {
	good := []GuardedWrite{
		{Session: "a", Token: 10, Version: 1}, {Session: "a", Token: 10, Version: 2},
		{Session: "b", Token: 30, Version: 4}, {Session: "c", Token: 31, Version: 5},
	}
	wantViolations(t, checkFencing(good))
	bad := append(good, GuardedWrite{Session: "a", Token: 10, Version: 6})
	wantViolations(t, checkFencing(bad), "token went down: version 5 was written by c with token 0x1f", "then version 6 by a with the older token 0xa")
	dup := append(good, GuardedWrite{Session: "d", Token: 40, Version: 5})
	wantViolations(t, checkFencing(dup), "two guarded writes produced version 5")
}

func TestCheckReads(t *testing.T) {
	good := map[string][]RegObs{
		"s1": {{Key: "/reg/r0", Version: 1, Read: true}, {Key: "/reg/r0", Version: 3}, {Key: "/reg/r0", Version: 3, Read: true}, {Key: "/reg/r1", Version: 0, Read: true}},
		"s2": {{Key: "/reg/r0", Version: 5, Read: true}},
	}
	wantViolations(t, checkReads(good))
	bad := map[string][]RegObs{
		"s1": {{Key: "/reg/r0", Version: 4}, {Key: "/reg/r0", Version: 2, Read: true}},
	}
	wantViolations(t, checkReads(bad), "session s1 read /reg/r0 at version 2", "after it wrote version 4")
}

func TestCheckRegisters(t *testing.T) {
	const k = "/reg/r0"
	set := func(client int, version int32, data string, call, ret int64, o Outcome, nv int32) RegOp {
		op := RegOp{Client: client, Key: k, Version: version, Data: data, Call: call, Return: ret, Outcome: o, NewVersion: nv}
		if o == Failed {
			op.Code = jute.CodeBadVersion
		}
		if o == Unknown {
			op.Return = -1
		}
		return op
	}
	tree := func(data string, v int32) Dump {
		return Dump{k: {Path: k, Data: []byte(data), Stat: jute.Stat{Version: v}}}
	}
	good := []RegOp{
		set(1, -1, "a", 0, 10, OK, 1),
		set(2, 0, "b", 5, 15, Failed, 0), // overlaps a; a went first
		set(3, 1, "c", 20, 30, Unknown, 0),
		set(4, 1, "d", 40, 50, Failed, 0), // c took effect
		set(5, 2, "e", 60, 70, OK, 3),
	}
	out, inconclusive := checkRegisters(good, tree("e", 3), []string{k}, 10*time.Second)
	wantViolations(t, out)
	if inconclusive {
		t.Error("inconclusive on a tiny history")
	}
	bad := append(good, set(6, -1, "f", 80, 90, OK, 3)) // version 3 twice
	out, _ = checkRegisters(bad, tree("f", 3), []string{k}, 10*time.Second)
	wantViolations(t, out, "not linearizable")
	out, _ = checkRegisters(good, tree("b", 3), []string{k}, 10*time.Second)
	wantViolations(t, out, "written by a set that failed")
}

func TestDiffDumps(t *testing.T) {
	a := sessionTree(12, true, 20)
	b := sessionTree(12, true, 20)
	if d := diffDumps(a, b, "s1", "s2", 10); len(d) != 0 {
		t.Errorf("equal trees differ: %v", d)
	}
	delete(b, "/markers/s1/m")
	n := b["/reg/r0"]
	n.Stat.Pzxid = 99
	b["/reg/r0"] = n
	d := diffDumps(a, b, "s1", "s2", 10)
	if len(d) != 2 || !strings.Contains(d[0], "/markers/s1/m only on s1") || !strings.Contains(d[1], "/reg/r0 differs") {
		t.Errorf("diff = %q", d)
	}
}

// fencedStats counts pairs of sections of different holders that overlap in time, and the
// writes the fence took and refused.
func TestFencedStats(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	secs := []Section{
		{Session: "b", Token: 20, Start: at(15), End: at(30), Accepted: 2},
		{Session: "a", Token: 10, Start: at(0), End: at(20), Accepted: 1, Rejected: 1},
		{Session: "c", Token: 30, Start: at(30), End: at(40), Accepted: 1},
		{Session: "a", Token: 10, Start: at(25), End: at(26)}, // same token: one holder's, no overlap
	}
	got := fencedStats(secs)
	want := "fenced resource: 4 critical sections, 2 pairs overlapping in time (unfenced, both would have written), 4 writes taken, 1 refused as stale"
	if got != want {
		t.Fatalf("fencedStats =\n%s\nwant\n%s", got, want)
	}
}
