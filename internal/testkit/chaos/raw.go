package chaos

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/zkd-io/zkd/conformance"
	"github.com/zkd-io/zkd/jute"
)

// openACL is world:anyone with every permission.
var openACL = []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "world", ID: "anyone"}}}

// errExpired reports that the server refused to reattach a session: it has ended.
var errExpired = errors.New("chaos: session expired")

// Node is one znode as read from one server.
type Node struct {
	Path string
	Data []byte
	Stat jute.Stat
}

// Dump is a full tree read from one server: every znode by path.
type Dump map[string]Node

// Children returns the paths of p's children in the dump, sorted.
func (d Dump) Children(p string) []string {
	var out []string
	for q := range d {
		if q != "/" && path.Dir(q) == p {
			out = append(out, q)
		}
	}
	slices.Sort(out)
	return out
}

// Under returns the paths at or below p, sorted.
func (d Dump) Under(p string) []string {
	var out []string
	for q := range d {
		if q == p || (len(q) > len(p) && q[:len(p)] == p && q[len(p)] == '/') {
			out = append(out, q)
		}
	}
	slices.Sort(out)
	return out
}

// attach opens a connection to addr and creates a session (sid 0) or reattaches one. It returns
// errExpired when the server answers that the session is gone. timeout bounds the dial and
// every later read and write on the connection.
func attach(addr string, timeout time.Duration, req jute.ConnectRequest) (*conformance.Raw, jute.ConnectResponse, error) {
	raw, err := conformance.DialRaw(addr, timeout)
	if err != nil {
		return nil, jute.ConnectResponse{}, err
	}
	resp, _, err := raw.Handshake(req)
	if err != nil {
		_ = raw.Close()
		return nil, resp, err
	}
	if resp.SessionID == 0 || resp.TimeOut <= 0 {
		_ = raw.Close()
		if req.SessionID == 0 {
			return nil, resp, fmt.Errorf("chaos: %s refused a new session", addr)
		}
		return nil, resp, errExpired
	}
	return raw, resp, nil
}

// closeSession sends closeSession on raw and returns the reply's zxid (the zxid of the close).
func closeSession(raw *conformance.Raw) (int64, error) {
	rep, err := raw.Call(jute.OpCloseSession, nil)
	if err != nil {
		return 0, err
	}
	if rep.Header.Err != jute.CodeOK {
		return 0, rep.Header.Err
	}
	return rep.Header.Zxid, nil
}

// dumpBatch bounds the requests a dump keeps in flight.
const dumpBatch = 256

// DumpTree reads every znode from the server at addr alone, after a sync, over one session that
// it closes afterwards. Requests are pipelined in batches.
func DumpTree(ctx context.Context, addr string) (Dump, error) {
	return DumpSubtrees(ctx, addr, "/")
}

// DumpSubtrees is DumpTree for the subtrees at roots only (a missing root is skipped).
func DumpSubtrees(ctx context.Context, addr string, roots ...string) (Dump, error) {
	raw, _, err := attach(addr, 10*time.Second, jute.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)})
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	stop := context.AfterFunc(ctx, func() { _ = raw.Close() })
	defer stop()
	if _, err := raw.Do(jute.OpSync, &jute.SyncRequest{Path: "/"}, &jute.SyncResponse{}); err != nil {
		return nil, fmt.Errorf("chaos: sync on %s: %w", addr, err)
	}
	d := Dump{}
	level := slices.Clone(roots)
	for len(level) > 0 {
		var next []string
		for len(level) > 0 {
			n := min(len(level), dumpBatch)
			batch := level[:n]
			level = level[n:]
			kids, err := dumpBatchOf(raw, batch, d)
			if err != nil {
				return nil, fmt.Errorf("chaos: dump of %s: %w", addr, errors.Join(ctx.Err(), err))
			}
			next = append(next, kids...)
		}
		level = next
	}
	if _, err := closeSession(raw); err != nil {
		return nil, fmt.Errorf("chaos: close dump session on %s: %w", addr, err)
	}
	return d, nil
}

// dumpBatchOf sends getData and getChildren for every path, reads the replies in order, adds the
// nodes to d and returns the children's paths. A node deleted meanwhile is skipped.
func dumpBatchOf(raw *conformance.Raw, paths []string, d Dump) ([]string, error) {
	xids := make([]int32, 0, 2*len(paths))
	for _, p := range paths {
		x1, x2 := raw.NextXid(), raw.NextXid()
		if err := raw.Send(x1, jute.OpGetData, &jute.GetDataRequest{Path: p}); err != nil {
			return nil, err
		}
		if err := raw.Send(x2, jute.OpGetChildren, &jute.GetChildrenRequest{Path: p}); err != nil {
			return nil, err
		}
		xids = append(xids, x1, x2)
	}
	var kids []string
	for i, p := range paths {
		rd, err := raw.ReadReplyFor(xids[2*i])
		if err != nil {
			return nil, err
		}
		rc, err := raw.ReadReplyFor(xids[2*i+1])
		if err != nil {
			return nil, err
		}
		if rd.Header.Err == jute.CodeNoNode || rc.Header.Err == jute.CodeNoNode {
			continue
		}
		if rd.Header.Err != jute.CodeOK || rc.Header.Err != jute.CodeOK {
			return nil, fmt.Errorf("read %s: getData %v, getChildren %v", p, rd.Header.Err, rc.Header.Err)
		}
		var data jute.GetDataResponse
		if err := rd.Decode(&data); err != nil {
			return nil, err
		}
		var ch jute.GetChildrenResponse
		if err := rc.Decode(&ch); err != nil {
			return nil, err
		}
		d[p] = Node{Path: p, Data: data.Data, Stat: data.Stat}
		for _, c := range ch.Children {
			kids = append(kids, path.Join(p, c))
		}
	}
	return kids, nil
}

// probe creates a session on addr alone, syncs, reads / and closes the session: the test that a
// server serves a fresh client. Each step is bounded by step.
func probe(addr string, step time.Duration) error {
	raw, _, err := attach(addr, step, jute.ConnectRequest{TimeOut: 4000, Passwd: make([]byte, 16)})
	if err != nil {
		return err
	}
	defer raw.Close()
	if _, err := raw.Do(jute.OpSync, &jute.SyncRequest{Path: "/"}, &jute.SyncResponse{}); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	if _, err := raw.Do(jute.OpGetData, &jute.GetDataRequest{Path: "/"}, &jute.GetDataResponse{}); err != nil {
		return fmt.Errorf("get: %w", err)
	}
	_, _ = closeSession(raw)
	return nil
}

// createPaths creates persistent nodes (NodeExists is fine) on a short-lived session at addr.
func createPaths(addr string, paths ...string) error {
	raw, _, err := attach(addr, 10*time.Second, jute.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)})
	if err != nil {
		return err
	}
	defer raw.Close()
	for _, p := range paths {
		_, err := raw.Do(jute.OpCreate, &jute.CreateRequest{Path: p, ACL: openACL}, &jute.CreateResponse{})
		if err != nil && !errors.Is(err, jute.CodeNodeExists) {
			return fmt.Errorf("chaos: create %s: %w", p, err)
		}
	}
	_, err = closeSession(raw)
	return err
}
