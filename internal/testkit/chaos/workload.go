package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/recipes"
)

// Paths the workloads use; Prepare creates them.
const (
	fifoRoot    = "/fifo"
	markersRoot = "/markers"
	regRoot     = "/reg"
	lockPath    = "/locks/l"
	resource    = "/lockres"
)

// registerKeys are the registers.
var registerKeys = []string{"/reg/r0", "/reg/r1", "/reg/r2"}

// basePaths are created before the workloads start.
var basePaths = append([]string{fifoRoot, markersRoot, regRoot, "/locks", resource}, registerKeys...)

// WorkloadConfig sizes the workloads.
type WorkloadConfig struct {
	FIFOClients     int // raw pipelining sessions running at any time
	RegisterClients int // go-zookeeper sessions doing setData and reads on the registers
	LockClients     int // recipes lock contenders doing guarded writes
	// LockPause is the chance that a lock holder pauses inside a critical section for 1.5 times
	// the session timeout (its client stopped as a long GC pause or SIGSTOP would stop it), and
	// then goes on writing to the fenced resource before it learns that its session expired.
	LockPause float64
	TimeoutMs int32 // requested session timeout of every workload session
	// Windows are the FIFO clients' most creates outstanding per connection, by slot (cycled);
	// a large window keeps a connection sending while its earlier writes are stuck.
	Windows []int
	// DoomedWindow is the window of the sessions frozen with a paused leader, kept full.
	DoomedWindow int
	// LockProcesses are lock contenders each in a process of its own (lockproc.go), which the
	// nemesis stops, kills and partitions; ContenderBin is the test binary they run.
	LockProcesses int
	ContenderBin  string
}

// Workloads runs the clients of one run. Start them with StartWorkloads; after cancelling the
// context given to it, Wait returns once every client has finished (sessions closed).
type Workloads struct {
	h       *History
	log     *slog.Logger
	servers []string
	cfg     WorkloadConfig
	seed    uint64
	start   time.Time
	wg      sync.WaitGroup
	procs   []*lockProc // the contender process slots
	// contenders counts the contender processes: started, ended by a signal, data races.
	contenders struct{ started, signalled, races atomic.Int64 }

	mu struct {
		sync.Mutex
		active map[int]*fifoClient // the current regular FIFO client of each slot
		all    []*fifoClient
		doomed int
	}
}

// StartWorkloads starts every client; they run until ctx ends. It fails only if the contender
// processes cannot be set up.
func StartWorkloads(ctx context.Context, h *History, log *slog.Logger, servers []string, cfg WorkloadConfig, seed uint64) (*Workloads, error) {
	w := &Workloads{h: h, log: log, servers: servers, cfg: cfg, seed: seed, start: time.Now()}
	w.mu.active = map[int]*fifoClient{}
	for i := range cfg.FIFOClients {
		w.wg.Go(func() { w.fifoSlot(ctx, i) })
	}
	for i := range cfg.RegisterClients {
		rng := rand.New(rand.NewPCG(seed, uint64(100+i)))
		w.wg.Go(func() {
			for k := 0; ctx.Err() == nil; k++ {
				w.registerSession(ctx, fmt.Sprintf("r%d.%d", i, k), rng)
			}
		})
	}
	for i := range cfg.LockClients {
		rng := rand.New(rand.NewPCG(seed, uint64(200+i)))
		w.wg.Go(func() {
			for k := 0; ctx.Err() == nil; k++ {
				w.lockSession(ctx, fmt.Sprintf("l%d.%d", i, k), rng)
			}
		})
	}
	if err := w.startLockProcs(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// Wait waits for every client to finish, then closes the connections frozen clients kept.
func (w *Workloads) Wait() {
	w.wg.Wait()
	w.closeLockProcs()
	w.mu.Lock()
	all := w.mu.all
	w.mu.Unlock()
	for _, c := range all {
		c.closeFrozen()
	}
}

// fifoConfig returns slot's client shape: 5 creates every 100ms up to its window; a doomed
// client (slot -1) keeps its window full.
func (w *Workloads) fifoConfig(slot int) fifoConfig {
	if slot < 0 {
		return fifoConfig{window: w.cfg.DoomedWindow, timeoutMs: w.cfg.TimeoutMs}
	}
	return fifoConfig{window: w.cfg.Windows[slot%len(w.cfg.Windows)], batch: 5, pace: 100 * time.Millisecond, timeoutMs: w.cfg.TimeoutMs}
}

// fifoSlot runs successive regular FIFO sessions in slot i: a new one when the last expired or
// was frozen.
func (w *Workloads) fifoSlot(ctx context.Context, i int) {
	for k := 0; ctx.Err() == nil; k++ {
		c := newFIFOClient(w.h, w.log, w.servers, w.fifoConfig(i), fmt.Sprintf("f%d.%d", i, k), "fifo")
		w.mu.Lock()
		w.mu.active[i] = c
		w.mu.all = append(w.mu.all, c)
		w.mu.Unlock()
		c.run(ctx, (i+k)%len(w.servers))
	}
}

// Silence freezes one running regular FIFO client (it stops sending anything, pings included)
// and returns its session name; its slot starts a new session.
func (w *Workloads) Silence(rng *rand.Rand) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.mu.active) == 0 {
		return ""
	}
	slot := rng.IntN(w.cfg.FIFOClients)
	c := w.mu.active[slot]
	if c == nil {
		return ""
	}
	c.freezeNow("silent")
	return c.rec.Name
}

// StartDoomed starts one burst-mode FIFO session on each given server and waits (bounded by
// ctx) until each is pipelining there. Freeze them with FreezeDoomed.
func (w *Workloads) StartDoomed(ctx, wait context.Context, servers []int) []*fifoClient {
	var cs []*fifoClient
	for _, s := range servers {
		w.mu.Lock()
		w.mu.doomed++
		name := fmt.Sprintf("d%d", w.mu.doomed)
		c := newFIFOClient(w.h, w.log, w.servers, w.fifoConfig(-1), name, "doomed")
		w.mu.all = append(w.mu.all, c)
		w.mu.Unlock()
		w.wg.Go(func() { c.run(ctx, s) })
		cs = append(cs, c)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for _, c := range cs {
		for c.writes.Load() < int64(w.cfg.DoomedWindow) {
			select {
			case <-wait.Done():
				return cs
			case <-tick.C:
			}
		}
	}
	return cs
}

// FreezeDoomed freezes the given clients: their sessions must expire.
func FreezeDoomed(cs []*fifoClient) {
	for _, c := range cs {
		c.freezeNow("doomed")
	}
}

// zkSession opens a go-zookeeper session for a workload client through recipes (which tracks
// session loss), waits for it, and creates its marker. It returns nil if ctx ends first or the
// session is lost before the marker exists.
func (w *Workloads) zkSession(ctx context.Context, rec *SessionRecord, log *slog.Logger) *recipes.Session {
	return w.zkSessionWith(ctx, rec, log, &zkDialer{})
}

// zkSessionWith is zkSession with the client's dialer d (which can pause the client).
func (w *Workloads) zkSessionWith(ctx context.Context, rec *SessionRecord, log *slog.Logger, d *zkDialer) *recipes.Session {
	timeout := time.Duration(w.cfg.TimeoutMs) * time.Millisecond
	s, err := recipes.Connect(w.servers, timeout, d.options(log)...)
	if err != nil {
		log.Info("connect failed", "err", err)
		sleepCtx(ctx, 200*time.Millisecond)
		return nil
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for s.Conn().State() != zk.StateHasSession {
		select {
		case <-ctx.Done():
			s.Close()
			return nil
		case <-tick.C:
		}
	}
	id := s.Conn().SessionID()
	w.h.update(func() { rec.ID = id })
	marker := markersRoot + "/" + rec.Name
	for _, step := range []struct {
		path  string
		flags int32
	}{{marker, 0}, {marker + "/m", zk.FlagEphemeral}} {
		for {
			_, err := s.Conn().Create(step.path, nil, step.flags, zk.WorldACL(zk.PermAll))
			if err == nil || errors.Is(err, zk.ErrNodeExists) {
				break
			}
			if s.Conn().SessionID() != id || ctx.Err() != nil {
				log.Info("session lost before its marker existed", "err", err)
				s.Close()
				w.h.update(func() { rec.End = EndAbandoned })
				return nil
			}
			sleepCtx(ctx, 100*time.Millisecond)
		}
	}
	w.h.update(func() { rec.Marker, rec.Owns = marker+"/m", []string{marker} })
	log.Info("session created", "id", hex(id))
	return s
}

// endZkSession closes a go-zookeeper workload session, or records that it expired.
func (w *Workloads) endZkSession(s *recipes.Session, rec *SessionRecord, id int64) {
	expired := s.Conn().SessionID() != id
	s.Close()
	w.h.update(func() {
		if expired {
			rec.End = EndExpired
		} else {
			rec.End = EndClosed
		}
	})
}

// registerSession runs one register client session until ctx ends or the session expires.
func (w *Workloads) registerSession(ctx context.Context, name string, rng *rand.Rand) {
	log := w.log.With("session", name)
	rec := w.h.session(name, "register")
	s := w.zkSession(ctx, rec, log)
	if s == nil {
		return
	}
	id := s.Conn().SessionID()
	defer w.endZkSession(s, rec, id)
	client := w.h.newClient()
	for i := 0; ctx.Err() == nil && s.Conn().SessionID() == id; i++ {
		key := registerKeys[rng.IntN(len(registerKeys))]
		version := int32(-1)
		if rng.IntN(2) == 0 {
			_, st, err := s.Conn().Get(key)
			if err != nil {
				continue
			}
			w.h.addObs(name, RegObs{Key: key, Version: st.Version, Mzxid: st.Mzxid, Read: true})
			version = st.Version
		}
		data := fmt.Sprintf("%s:%d", name, i)
		call := time.Since(w.start).Nanoseconds()
		st, err := s.Conn().Set(key, []byte(data), version)
		ret := time.Since(w.start).Nanoseconds()
		outcome, keep := classify(err)
		if !keep {
			continue
		}
		op := RegOp{Client: client, Key: key, Version: version, Data: data, Call: call, Return: ret, Outcome: outcome}
		switch outcome {
		case OK:
			op.NewVersion = st.Version
			w.h.addObs(name, RegObs{Key: key, Version: st.Version, Mzxid: st.Mzxid})
			w.h.update(func() { rec.Acked = append(rec.Acked, AckedWrite{"set " + key + " " + data, st.Mzxid}) })
		case Failed:
			op.Code = codeOf(err)
		case Unknown:
			op.Return = -1
			client = w.h.newClient() // its op stays open forever
		}
		w.h.addRegOp(op)
		sleepCtx(ctx, time.Duration(30+rng.IntN(70))*time.Millisecond) // pacing
	}
}

// lockSession runs one lock contender session: acquire, a few guarded writes of the token, release.
func (w *Workloads) lockSession(ctx context.Context, name string, rng *rand.Rand) {
	log := w.log.With("session", name)
	rec := w.h.session(name, "lock")
	d := &zkDialer{}
	s := w.zkSessionWith(ctx, rec, log, d)
	if s == nil {
		return
	}
	id := s.Conn().SessionID()
	defer w.endZkSession(s, rec, id)
	w.lockLoop(ctx, s, id, name, rng, d, historyLedger{w.h, rec})
}

// lockLedger is where a lock contender's critical sections go: the run's History in this
// process, or the test process, through a pipe, from a contender process (lockproc.go).
type lockLedger interface {
	// fencedWrite is one write to the external fenced resource: whether it took it.
	fencedWrite(token int64) bool
	holding(token int64) // a section begins
	addSection(Section)  // and ends
	addGuarded(GuardedWrite)
	acked(AckedWrite)
}

// historyLedger is the ledger of an in-process contender.
type historyLedger struct {
	h   *History
	rec *SessionRecord
}

func (l historyLedger) fencedWrite(token int64) bool { return l.h.fencedWrite(token) }
func (l historyLedger) holding(int64)                {}
func (l historyLedger) addSection(s Section)         { l.h.addSection(s) }
func (l historyLedger) addGuarded(g GuardedWrite)    { l.h.addGuarded(g) }
func (l historyLedger) acked(a AckedWrite) {
	l.h.update(func() { l.rec.Acked = append(l.rec.Acked, a) })
}

// lockLoop takes the lock over and over in session s (id) until ctx ends or the session does:
// in each critical section a few writes to the fenced resource and guarded writes of the token.
func (w *Workloads) lockLoop(ctx context.Context, s *recipes.Session, id int64, name string, rng *rand.Rand, d *zkDialer, l lockLedger) {
	log := w.log.With("session", name)
	m := recipes.NewMutex(s, lockPath)
	for ctx.Err() == nil && s.Conn().SessionID() == id {
		lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		lease, err := m.Lock(lctx)
		cancel()
		if err != nil {
			log.Debug("lock failed", "err", err)
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		tok := lease.Token()
		l.holding(tok.Czxid)
		sec := Section{Session: name, Token: tok.Czxid, Start: time.Now()}
		for range 1 + rng.IntN(3) {
			// The external resource first: a holder writes there as long as it believes it
			// holds the lock, and only the token keeps a stale holder out.
			if l.fencedWrite(tok.Czxid) {
				sec.Accepted++
			} else {
				sec.Rejected++
			}
			sec.End = time.Now()
			if rng.Float64() < w.cfg.LockPause {
				// Stopped mid-section past its session's timeout; it resumes as a stopped
				// process does, writing on before it learns what happened meanwhile.
				log.Info("holder paused", "token", hex(tok.Czxid))
				resume := d.pause()
				sleepCtx(ctx, 3*time.Duration(w.cfg.TimeoutMs)*time.Millisecond/2)
				resume()
				if l.fencedWrite(tok.Czxid) {
					sec.Accepted++
				} else {
					sec.Rejected++
				}
				sec.End = time.Now()
			}
			data := fmt.Sprintf("%s:%s", name, hex(tok.Czxid))
			res, err := lease.Multi(ctx, &zk.SetDataRequest{Path: resource, Data: []byte(data), Version: -1})
			if err != nil || len(res) != 1 || res[0].Stat == nil {
				log.Debug("guarded write failed", "err", err)
				break
			}
			st := res[0].Stat
			l.addGuarded(GuardedWrite{Session: name, Token: tok.Czxid, Version: st.Version, Mzxid: st.Mzxid})
			l.acked(AckedWrite{"guarded set " + resource + " " + data, st.Mzxid})
			sleepCtx(ctx, time.Duration(10+rng.IntN(50))*time.Millisecond) // holding
		}
		l.addSection(sec)
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := lease.Unlock(uctx); err != nil {
			log.Debug("unlock", "err", err)
		}
		cancel()
	}
}

// codeOf names a definite go-zookeeper error in the history.
func codeOf(err error) jute.Code {
	switch {
	case errors.Is(err, zk.ErrBadVersion):
		return jute.CodeBadVersion
	case errors.Is(err, zk.ErrNoNode):
		return jute.CodeNoNode
	case errors.Is(err, zk.ErrSessionMoved):
		return jute.CodeSessionMoved
	default:
		return jute.CodeSystemError
	}
}
