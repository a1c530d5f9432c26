package consensus

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/zkd-io/zkd/jute"
)

// linearizabilityDuration is how long the workload runs; long_test.go (build tag long) raises it.
var linearizabilityDuration = 6 * time.Second

type lzKind int

const (
	lzCreate lzKind = iota
	lzSet
	lzDelete
	lzRead // sync, then getData on the same node
)

type lzInput struct {
	kind    lzKind
	path    string
	data    string
	version int32 // lzSet: expected version (-1 any)
}

type lzOutput struct {
	unknown bool      // proposed, outcome unknown
	code    jute.Code // result code of a write (CodeOK on success)
	exists  bool      // lzRead
	data    string    // lzRead
	version int32     // lzRead, and lzSet's new version
}

type lzState struct {
	exists  bool
	data    string
	version int32
}

// step is the sequential specification of one znode.
func lzStep(s lzState, in lzInput) (lzState, lzOutput) {
	switch in.kind {
	case lzCreate:
		if s.exists {
			return s, lzOutput{code: jute.CodeNodeExists}
		}
		return lzState{exists: true, data: in.data}, lzOutput{}
	case lzSet:
		if !s.exists {
			return s, lzOutput{code: jute.CodeNoNode}
		}
		if in.version != -1 && in.version != s.version {
			return s, lzOutput{code: jute.CodeBadVersion}
		}
		n := lzState{exists: true, data: in.data, version: s.version + 1}
		return n, lzOutput{version: n.version}
	case lzDelete:
		if !s.exists {
			return s, lzOutput{code: jute.CodeNoNode}
		}
		return lzState{}, lzOutput{}
	default:
		return s, lzOutput{exists: s.exists, data: s.data, version: s.version}
	}
}

var lzModel = porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			p := op.Input.(lzInput).path
			if _, ok := by[p]; !ok {
				keys = append(keys, p)
			}
			by[p] = append(by[p], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() []any { return []any{lzState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(lzState), input.(lzInput), output.(lzOutput)
		next, want := lzStep(s, in)
		if out.unknown {
			return []any{s, next} // it may or may not have happened
		}
		if want != out {
			return nil
		}
		return []any{next}
	},
	Equal: func(a, b any) bool { return a.(lzState) == b.(lzState) },
	DescribeOperation: func(input, output any) string {
		in, _ := input.(lzInput)
		out, _ := output.(lzOutput)
		return fmt.Sprintf("%v %s %q v%d -> %+v", in.kind, in.path, in.data, in.version, out)
	},
}

func lzSeed(t *testing.T) uint64 {
	if s := os.Getenv("ZKD_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ZKD_SEED: %v", err)
		}
		return v
	}
	return uint64(time.Now().UnixNano())
}

// TestLinearizability runs clients doing create/set/delete and sync+read against all nodes of a
// 3-node cluster while the test partitions nodes, kills and restarts leaders and transfers
// leadership, then checks the history with porcupine. Replay a failure with ZKD_SEED=<seed>.
func TestLinearizability(t *testing.T) {
	if testing.Short() {
		t.Skip("long randomized test")
	}
	seed := lzSeed(t)
	t.Logf("seed %d (replay with ZKD_SEED=%d); duration %v", seed, seed, linearizabilityDuration)
	rng := rand.New(rand.NewPCG(seed, 1))
	c := newCluster(t, 3, false, func(cfg *Config) { cfg.HoldTimeout = time.Second; cfg.ApplyTimeout = 3 * time.Second })
	c.leader()

	var mu sync.Mutex
	live := map[string]*Node{}
	for _, n := range c.running() {
		live[n.ID()] = n
	}
	pick := func(r *rand.Rand) *Node {
		mu.Lock()
		defer mu.Unlock()
		id := c.ids[r.IntN(len(c.ids))]
		return live[id]
	}
	paths := []string{"/x", "/y", "/z"}
	start := time.Now()
	var hmu sync.Mutex
	var history []porcupine.Operation
	nextClient := 0
	newClient := func() int {
		hmu.Lock()
		defer hmu.Unlock()
		nextClient++
		return nextClient - 1
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 5 {
		r := rand.New(rand.NewPCG(seed, uint64(w)+2))
		wg.Go(func() {
			client := newClient()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := pick(r)
				if n == nil {
					continue
				}
				in := lzInput{kind: lzKind(r.IntN(4)), path: paths[r.IntN(len(paths))], data: fmt.Sprintf("w%d-%d", w, i), version: -1}
				if in.kind == lzSet && r.IntN(2) == 0 {
					in.version = int32(r.IntN(3))
				}
				call := time.Since(start).Nanoseconds()
				out, keep := lzRun(n, in)
				ret := time.Since(start).Nanoseconds()
				if !keep {
					continue // failed before anything was proposed, or a failed read
				}
				op := porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
				if out.unknown {
					op.Return = -1 // patched to "after everything" below
				}
				hmu.Lock()
				history = append(history, op)
				hmu.Unlock()
				if out.unknown {
					client = newClient() // the unknown op stays open forever
				}
			}
		})
	}

	// Faults, from the test goroutine.
	deadline := time.Now().Add(linearizabilityDuration)
	for time.Now().Before(deadline) {
		time.Sleep(time.Duration(200+rng.IntN(400)) * time.Millisecond) // the fault schedule
		switch rng.IntN(4) {
		case 0:
			victim := c.ids[rng.IntN(len(c.ids))]
			c.fab.Isolate(victim, c.ids)
			time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
			c.fab.Heal()
		case 1:
			l := c.leader()
			mu.Lock()
			delete(live, l.ID())
			mu.Unlock()
			c.stop(l.ID())
			time.Sleep(time.Duration(200+rng.IntN(500)) * time.Millisecond)
			c.start(l.ID())
			mu.Lock()
			live[l.ID()] = c.nodes[l.ID()]
			mu.Unlock()
		case 2:
			// Hand leadership over while writes flow (refused and retried meanwhile).
			tctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			if err := c.leader().TransferLeadership(tctx); err != nil {
				t.Logf("leadership transfer: %v", err)
			}
			cancel()
		default:
			// a quiet period
		}
	}
	close(stop)
	wg.Wait()
	c.fab.Heal()
	c.converge()

	// An unknown outcome may take effect any time after its call: it returns after everything,
	// including the calls made after the last known return (a cluster that answered nothing
	// for a while, then took calls that timed out, or porcupine would see a return before its
	// call).
	var maxRet int64
	for _, op := range history {
		maxRet = max(maxRet, op.Call, op.Return)
	}
	unknown := 0
	for i := range history {
		if history[i].Return == -1 {
			history[i].Return = maxRet + int64(time.Second)
			unknown++
		}
	}
	t.Logf("%d operations (%d with unknown outcome) from %d client ids", len(history), unknown, nextClient)
	if len(history) < 50 {
		t.Fatalf("only %d operations completed", len(history))
	}
	res, info := porcupine.CheckOperationsVerbose(lzModel.ToModel(), history, 60*time.Second)
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		t.Errorf("history is not linearizable (seed %d)", seed)
		for _, op := range history {
			in, out := op.Input.(lzInput), op.Output.(lzOutput)
			t.Logf("client %d [%d, %d] %v %s %q v%d -> %+v", op.ClientId, op.Call/1000, op.Return/1000, in.kind, in.path, in.data, in.version, out)
		}
		file := filepath.Join(os.TempDir(), fmt.Sprintf("zkd-linearizability-%d.html", seed))
		if err := porcupine.VisualizePath(lzModel.ToModel(), info, file); err == nil {
			t.Logf("visualization: %s", file)
		}
		t.Fatalf("history is not linearizable (seed %d)", seed)
	default:
		t.Logf("porcupine timed out; result unknown (seed %d)", seed)
	}
}

// lzRun performs one operation; keep is false when the operation surely had no effect and
// produced no observation.
func lzRun(n *Node, in lzInput) (out lzOutput, keep bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	if in.kind == lzRead {
		if err := n.Sync(ctx); err != nil {
			return out, false
		}
		r, err := n.View().Read(0, nil, jute.OpGetData, &jute.GetDataRequest{Path: in.path})
		if errors.Is(err, jute.CodeNoNode) {
			return lzOutput{}, true
		}
		if err != nil {
			return out, false
		}
		g := r.(*jute.GetDataResponse)
		return lzOutput{exists: true, data: string(g.Data), version: g.Stat.Version}, true
	}
	var p Proposal
	switch in.kind {
	case lzCreate:
		p = createReq(in.path, []byte(in.data), jute.ModePersistent)
	case lzSet:
		p = setReq(in.path, []byte(in.data), in.version)
	default:
		p = deleteReq(in.path, -1)
	}
	res, err := n.Propose(ctx, p)
	switch {
	case err == nil:
	case errors.Is(err, ErrNoLeader), errors.Is(err, ErrBadRequest), errors.Is(err, ErrShutdown) && !errors.Is(err, ErrUnknownOutcome):
		return out, false
	default:
		return lzOutput{unknown: true}, true
	}
	if res.Err != nil {
		var code jute.Code
		if !errors.As(res.Err, &code) {
			return lzOutput{unknown: true}, true
		}
		out.code = code
		return out, true
	}
	if s, ok := res.Resp.(*jute.SetDataResponse); ok {
		out.version = s.Stat.Version
	}
	return out, true
}

// TestLinearizabilityModelRejectsStaleRead makes sure the checker can fail: a read that misses a
// write which completed before the read began is not linearizable.
func TestLinearizabilityModelRejectsStaleRead(t *testing.T) {
	h := []porcupine.Operation{
		{ClientId: 0, Input: lzInput{kind: lzCreate, path: "/x", data: "a", version: -1}, Call: 0, Output: lzOutput{}, Return: 10},
		{ClientId: 1, Input: lzInput{kind: lzRead, path: "/x"}, Call: 20, Output: lzOutput{exists: false}, Return: 30},
	}
	if porcupine.CheckOperations(lzModel.ToModel(), h) {
		t.Fatal("stale read accepted")
	}
	h[1].Output = lzOutput{exists: true, data: "a"}
	if !porcupine.CheckOperations(lzModel.ToModel(), h) {
		t.Fatal("fresh read rejected")
	}
	// An unknown-outcome create may or may not have happened.
	h[0].Output, h[0].Return = lzOutput{unknown: true}, 1000
	h[1].Output = lzOutput{exists: false}
	if !porcupine.CheckOperations(lzModel.ToModel(), h) {
		t.Fatal("read concurrent with an unknown create rejected")
	}
}
