package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Fault kinds.
const (
	FaultKillOne         = "kill-one"         // SIGKILL a random server, restart it on its data
	FaultKillLeader      = "kill-leader"      // the same for the leader
	FaultKillAll         = "kill-all"         // SIGKILL all three, restart them
	FaultPauseLeader     = "pause-leader"     // SIGSTOP the leader past the session timeout, SIGCONT
	FaultPartitionOne    = "partition-one"    // blackhole a random server from the others (not from clients)
	FaultPartitionLeader = "partition-leader" // the same for the leader
	FaultIsolate         = "isolate"          // a random server's veth down: cut off from everyone
	FaultThrottle        = "throttle"         // a random server's link limited to 256 kbit/s
	FaultSilentClient    = "silent-client"    // a FIFO client stops sending anything: its session must expire
	// The lock holders in processes of their own (WorkloadConfig.LockProcesses):
	FaultStopHolder      = "stop-holder"      // SIGSTOP the holder past the session timeout, SIGCONT
	FaultKillHolder      = "kill-holder"      // SIGKILL the holder (a new contender process takes its slot)
	FaultPartitionHolder = "partition-holder" // cut the holder off from every server past the session timeout
)

// Faults lists the fault kinds in report order.
var Faults = []string{FaultKillOne, FaultKillLeader, FaultKillAll, FaultPauseLeader, FaultPartitionOne,
	FaultPartitionLeader, FaultIsolate, FaultThrottle, FaultSilentClient, FaultStopHolder, FaultKillHolder,
	FaultPartitionHolder}

// serveDeadline bounds how long a server may take to serve again after a heal before that
// counts as a violation.
const serveDeadline = 90 * time.Second

// nemesis injects faults on a seeded schedule. Kinds, victims and durations come from its rng in
// a fixed order, so a seed replays the same schedule (the leader it hits is whoever leads then).
type nemesis struct {
	c       *Cluster
	w       *Workloads
	rng     *rand.Rand
	logf    func(format string, args ...any)
	timeout time.Duration // the workload session timeout

	mu struct {
		sync.Mutex
		counts     map[string]int
		serve      map[string][]time.Duration // every server
		victims    map[string][]time.Duration // the servers the fault hit
		violations []Violation
	}
}

func newNemesis(c *Cluster, w *Workloads, seed uint64, timeout time.Duration, logf func(string, ...any)) *nemesis {
	n := &nemesis{c: c, w: w, rng: rand.New(rand.NewPCG(seed, 0x6e656d)), logf: logf, timeout: timeout}
	n.mu.counts = map[string]int{}
	n.mu.serve = map[string][]time.Duration{}
	n.mu.victims = map[string][]time.Duration{}
	return n
}

// between returns a duration uniformly in [lo, hi).
func (n *nemesis) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.rng.Int64N(int64(hi-lo)))
}

// run injects faults until ctx ends or the deadline passes (a fault under way is completed and
// healed). Each round goes through every kind once, in a seeded order.
func (n *nemesis) run(ctx context.Context, until time.Time) error {
	var order []string
	for i := 0; ; i++ {
		if i%len(Faults) == 0 {
			order = slices.Clone(Faults)
			n.rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		}
		quiet := n.between(time.Second, 3*time.Second)
		kind := order[i%len(order)]
		victim := n.rng.IntN(len(n.c.Servers))
		if time.Now().Add(quiet).After(until) || ctx.Err() != nil {
			return ctx.Err()
		}
		sleepCtx(ctx, quiet)
		if err := n.inject(ctx, kind, victim); err != nil {
			return fmt.Errorf("chaos: fault %s: %w", kind, err)
		}
	}
}

// inject runs one fault from start to heal, and measures the time to serve afterwards.
func (n *nemesis) inject(ctx context.Context, kind string, victim int) error {
	c := n.c
	lctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if kind == FaultStopHolder || kind == FaultKillHolder || kind == FaultPartitionHolder {
		return n.hurtHolder(ctx, kind)
	}
	leader := -1
	if kind == FaultKillLeader || kind == FaultPauseLeader || kind == FaultPartitionLeader {
		l, err := c.Leader(lctx)
		if err != nil {
			return err
		}
		leader, victim = l, l
	}
	n.mu.Lock()
	n.mu.counts[kind]++
	n.mu.Unlock()
	var healed time.Time
	hit := []int{victim}
	switch kind {
	case FaultKillOne, FaultKillLeader:
		hold := n.between(time.Second, 4*time.Second)
		n.logf("fault %s: SIGKILL server %d (pid %d), restart in %v", kind, victim+1, c.PID(victim), hold.Round(time.Millisecond))
		if err := c.Kill(victim); err != nil {
			return err
		}
		sleepCtx(ctx, hold)
		if err := c.Restart(victim); err != nil {
			return err
		}
		healed = time.Now()
	case FaultKillAll:
		hold := n.between(time.Second, 3*time.Second)
		n.logf("fault %s: SIGKILL all servers, restart in %v", kind, hold.Round(time.Millisecond))
		hit = []int{0, 1, 2}
		for i := range c.Servers {
			if err := c.Kill(i); err != nil {
				return err
			}
		}
		sleepCtx(ctx, hold)
		for i := range c.Servers {
			if err := c.Restart(i); err != nil {
				return err
			}
		}
		healed = time.Now()
	case FaultPauseLeader:
		hold := n.timeout + n.between(2*time.Second, 6*time.Second)
		follower := (leader + 1 + n.rng.IntN(len(c.Servers)-1)) % len(c.Servers)
		wait, cancelWait := context.WithTimeout(ctx, 5*time.Second)
		doomed := n.w.StartDoomed(ctx, wait, []int{leader, follower})
		cancelWait()
		n.logf("fault %s: SIGSTOP leader %d (pid %d) for %v; freezing doomed sessions %s (on the leader) and %s (on server %d)",
			kind, leader+1, c.PID(leader), hold.Round(time.Millisecond), doomed[0].rec.Name, doomed[1].rec.Name, follower+1)
		if err := c.Pause(leader); err != nil {
			return err
		}
		// Let the doomed clients' last writes reach the frozen leader, then silence them.
		sleepCtx(ctx, 50*time.Millisecond)
		FreezeDoomed(doomed)
		sleepCtx(ctx, hold)
		if err := c.Resume(leader); err != nil {
			return err
		}
		healed = time.Now()
	case FaultPartitionOne, FaultPartitionLeader, FaultIsolate, FaultThrottle:
		hold := n.between(4*time.Second, 10*time.Second)
		n.logf("fault %s: server %d for %v", kind, victim+1, hold.Round(time.Millisecond))
		var err error
		switch kind {
		case FaultIsolate:
			err = c.Net.Isolate(ctx, victim)
		case FaultThrottle:
			err = c.Net.Throttle(ctx, victim)
		default:
			err = c.Net.Partition(ctx, victim)
		}
		if err != nil {
			return errors.Join(err, c.Net.Heal(context.Background()))
		}
		sleepCtx(ctx, hold)
		if err := c.Net.Heal(context.Background()); err != nil {
			return err
		}
		healed = time.Now()
	case FaultSilentClient:
		hold := n.timeout + n.between(2*time.Second, 4*time.Second)
		name := n.w.Silence(n.rng)
		n.logf("fault %s: FIFO session %s stops sending; waiting %v", kind, name, hold.Round(time.Millisecond))
		sleepCtx(ctx, hold)
		return nil
	}
	n.measureServe(kind, healed, hit)
	return nil
}

// hurtHolder stops, kills or partitions the contender process holding the lock. Its session
// expires meanwhile (a stopped or cut-off holder comes back believing it holds the lock until it
// learns otherwise; the fence must refuse what it writes then). Nothing to do without contender
// processes, or when none comes to hold the lock within a few seconds.
func (n *nemesis) hurtHolder(ctx context.Context, kind string) error {
	if len(n.w.procs) == 0 {
		return nil
	}
	p := n.w.LockHolder(ctx, 10*time.Second)
	if p == nil {
		n.logf("fault %s: no contender process holds the lock; skipped", kind)
		return nil
	}
	n.mu.Lock()
	n.mu.counts[kind]++
	n.mu.Unlock()
	hold := n.timeout*3/2 + n.between(0, 2*time.Second)
	switch kind {
	case FaultStopHolder:
		n.logf("fault %s: SIGSTOP contender %d (pid %d) for %v", kind, p.slot, p.pid(), hold.Round(time.Millisecond))
		if err := p.signal(syscall.SIGSTOP); err != nil {
			return err
		}
		sleepCtx(ctx, hold)
		return p.signal(syscall.SIGCONT)
	case FaultKillHolder:
		n.logf("fault %s: SIGKILL contender %d (pid %d)", kind, p.slot, p.pid())
		return p.signal(syscall.SIGKILL)
	default:
		n.logf("fault %s: contender %d (pid %d) cut off from every server for %v", kind, p.slot, p.pid(), hold.Round(time.Millisecond))
		p.partition(true)
		sleepCtx(ctx, hold)
		p.partition(false)
		return nil
	}
}

// measureServe records, per server, how long after healed a fresh client connected to it alone
// completes sync and a read (separately for the servers in hit, which the fault affected); a
// server that does not within serveDeadline is a violation.
func (n *nemesis) measureServe(kind string, healed time.Time, hit []int) {
	var wg sync.WaitGroup
	took := make([]time.Duration, len(n.c.Servers))
	for i, s := range n.c.Servers {
		wg.Go(func() {
			took[i] = -1
			for time.Since(healed) < serveDeadline {
				if err := probe(s.Addr, 2*time.Second); err == nil {
					took[i] = time.Since(healed)
					return
				}
				time.Sleep(100 * time.Millisecond) // retry back-off
			}
		})
	}
	wg.Wait()
	n.mu.Lock()
	defer n.mu.Unlock()
	parts := ""
	for i, d := range took {
		if d < 0 {
			n.mu.violations = append(n.mu.violations, Violation{CheckServe, fmt.Sprintf("server %d did not serve a fresh client within %v after %s was healed", i+1, serveDeadline, kind)})
			parts += fmt.Sprintf(" s%d=never", i+1)
			continue
		}
		n.mu.serve[kind] = append(n.mu.serve[kind], d)
		if slices.Contains(hit, i) {
			n.mu.victims[kind] = append(n.mu.victims[kind], d)
		}
		parts += fmt.Sprintf(" s%d=%.1fs", i+1, d.Seconds())
	}
	n.logf("healed %s; time to serve:%s", kind, parts)
}
