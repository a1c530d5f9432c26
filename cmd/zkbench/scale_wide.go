package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/jute"
)

// scaleWide creates the wide node's children, then reads them three ways: the count
// (getAllChildrenNumber), the whole list by a client that accepts any size, and the list by a
// go-zookeeper client limited to o.WideLimit, which must fail that call and keep its session.
func scaleWide(ctx context.Context, o scaleOptions, s *server, rec *scaleRecord, logf func(string, ...any)) error {
	const wide = "/wide"
	c, err := dialClient(s.addrs[0], 30*time.Second, nil)
	if err != nil {
		return err
	}
	defer func() { _ = c.close() }()
	if err := create(c, wide, nil, jute.ModePersistent); err != nil {
		return err
	}
	logf("%s: creating %d children of %s", s.kind, o.Wide, wide)
	start := time.Now()
	const chunk = 10000
	for i := 0; i < o.Wide; i += chunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		paths := make([]string, 0, chunk)
		for j := i; j < min(i+chunk, o.Wide); j++ {
			paths = append(paths, fmt.Sprintf("%s/c-%07d", wide, j))
		}
		if err := createMany(c, paths, nil); err != nil {
			return err
		}
	}
	rec.Wide = o.Wide
	rec.WideCreateS = time.Since(start).Seconds()
	var took []float64
	for range 5 {
		t0 := time.Now()
		r := c.call(jute.OpGetAllChildrenNumber, &jute.GetAllChildrenNumberRequest{Path: wide})
		took = append(took, msSince(t0))
		if err := r.result(); err != nil {
			return fmt.Errorf("getAllChildrenNumber: %w", err)
		}
		if got := r.body.(*jute.GetAllChildrenNumberResponse).TotalNumber; int(got) != o.Wide {
			return fmt.Errorf("getAllChildrenNumber %s = %d, want %d", wide, got, o.Wide)
		}
	}
	rec.AllChildrenMS = median(took)
	t0 := time.Now()
	var size atomic.Int64
	r := c.callInto(jute.OpGetChildren, &jute.GetChildrenRequest{Path: wide}, &countingChildren{size: &size})
	rec.WideReadMS = msSince(t0)
	if err := r.result(); err != nil {
		rec.WideLimited = "the full read failed: " + err.Error()
		return nil
	}
	rec.WideReplyMB = float64(size.Load()) / (1 << 20)

	// A client whose jute.maxbuffer the reply exceeds, as most are at 1 M children.
	conn, events, err := zk.Connect(s.addrs, 30*time.Second, zk.WithMaxBufferSize(o.WideLimit),
		zk.WithLogInfo(false), zk.WithLogger(zkLogger(logf)))
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := waitZKState(ctx, events, zk.StateHasSession); err != nil {
		return err
	}
	id := conn.SessionID()
	_, _, err = conn.Children(wide)
	switch {
	case err == nil:
		rec.WideLimited = fmt.Sprintf("read in full (the reply fits in %d B)", o.WideLimit)
	default:
		rec.WideLimited = "error: " + err.Error()
	}
	if err := waitZKState(ctx, events, zk.StateHasSession); err == nil {
		ok, _, eerr := conn.Exists(wide)
		rec.WideSessionKept = eerr == nil && ok && conn.SessionID() == id
	}
	logf("%s: getAllChildrenNumber %.2f ms; getChildren %.1f MB in %.0f ms; limited client: %s, session kept %v",
		s.kind, rec.AllChildrenMS, rec.WideReplyMB, rec.WideReadMS, rec.WideLimited, rec.WideSessionKept)
	return nil
}

// zkLogger sends go-zookeeper's log lines to the harness's log.
type zkLogger func(string, ...any)

// Printf logs one line.
func (l zkLogger) Printf(format string, a ...any) { l("go-zookeeper: "+format, a...) }

// waitZKState waits up to a minute for a go-zookeeper connection to reach want.
func waitZKState(ctx context.Context, events <-chan zk.Event, want zk.State) error {
	timeout := time.After(time.Minute)
	for {
		select {
		case ev := <-events:
			if ev.State == want {
				return nil
			}
			if ev.State == zk.StateExpired {
				return zk.ErrSessionExpired
			}
		case <-timeout:
			return fmt.Errorf("zkbench: no %v within a minute", want)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// countingChildren decodes a getChildren reply by counting its bytes, without keeping the names.
type countingChildren struct{ size *atomic.Int64 }

// Encode is never called: it is only decoded.
func (v *countingChildren) Encode(*jute.Encoder) {}

// Decode counts the reply's names and their bytes.
func (v *countingChildren) Decode(d *jute.Decoder) {
	var n int64 = 4
	for range max(d.VectorLen(4), 0) {
		n += int64(4 + len(d.Buffer()))
	}
	v.size.Store(n)
}
