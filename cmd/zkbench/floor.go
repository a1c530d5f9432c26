package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// The floor server ("zkbench floor") is a yardstick, not a ZooKeeper: the least work a server of
// ZooKeeper's protocol and durability does on this machine. It keeps the tree in one map under
// one mutex, logs every write (and every session's creation and close) to one pre-zeroed file
// with one fdatasync per batch, as ZooKeeper's group commit does, and answers. It has no
// replication, snapshots, ACLs, quotas, session timeouts or limits, and a session ends with its
// connection. Run by `zkbench compare -zkd BIN -zkd-args "floor -port {port} -dir {data}"`, its
// ratio to ZooKeeper is about the most any server can reach on the machine in that workload:
// what zkd's own ratio can be judged against. With -nodes 3 it is a replicated floor
// (floorrepl.go): node 1 serves every client and also sends each batch to the other two, which
// log it with their own fdatasync; a batch is answered once it is durable on a majority.

// floorLogSize is the log file's size. It is zeroed when the server starts, so that appends
// overwrite written blocks (the cheapest fsync, as zkd's zero-ahead does), and is written again
// from its start when full: the floor keeps no data worth reading back.
const floorLogSize = 256 << 20

type floorNode struct {
	data []byte
	stat jute.Stat
	kids map[string]struct{}
}

// floorReq is a request that goes through the log, in arrival order: writes, the connect and
// close of a session, and any request behind a write of its connection.
type floorReq struct {
	c       *floorConn
	hdr     jute.RequestHeader
	body    jute.Record
	connect *jute.ConnectRequest
	gone    bool // the connection ended: end its session
}

type floorConn struct {
	nc      net.Conn
	wmu     sync.Mutex
	sid     int64
	pending atomic.Int32 // requests handed to the committer and not yet answered
	closed  atomic.Bool
}

func (c *floorConn) write(b []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.nc.Write(b); err != nil {
		_ = c.nc.Close()
	}
}

type floorServer struct {
	in   chan floorReq
	log  *os.File
	size int64 // the log file's size
	off  int64

	mu         sync.Mutex // guards the fields below
	nodes      map[string]*floorNode
	zxid       int64
	lastSid    int64
	ephemerals map[int64]map[string]struct{}
	dataW      map[string][]*floorConn // getData and exists watches
	childW     map[string][]*floorConn
	out        map[*floorConn][]byte // the batch's replies and events, by connection
	held       *[]floorEvent         // while a multi runs: its events, fired only if it succeeds

	repl *floorReplicas // the other nodes' logs (floorrepl.go); nil standalone
}

func floorMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("zkbench floor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("port", 2181, "client port, on 127.0.0.1")
	dir := fs.String("dir", "", "directory for the log file (required)")
	nodes := fs.Int("nodes", 1, "nodes of a replicated floor: node 1 serves clients on -port and dials node i at its own -port + i-1, where node i (started with that -port) takes the log")
	node := fs.Int("node", 1, "this node's number, 1 to -nodes")
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof on this address (e.g. 127.0.0.1:28090), to profile the floor beside zkd")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pprofAddr != "" {
		ln, err := net.Listen("tcp", *pprofAddr)
		if err != nil {
			return err
		}
		defer servePprof(ln)()
	}
	if *dir == "" {
		return errors.New("zkbench floor: -dir is required")
	}
	if *nodes < 1 || *node < 1 || *node > *nodes {
		return fmt.Errorf("zkbench floor: node %d of %d", *node, *nodes)
	}
	s, err := newFloorServer(*dir, floorLogSize)
	if err != nil {
		return err
	}
	defer s.log.Close()
	if *node > 1 {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "floor node %d taking the log on %s, log in %s\n", *node, ln.Addr(), s.log.Name())
		return s.follow(ctx, ln)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if *nodes > 1 {
		addrs := make([]string, 0, *nodes-1)
		for i := 1; i < *nodes; i++ {
			addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", *port+i))
		}
		if s.repl, err = dialReplicas(ctx, cancel, addrs, stderr); err != nil {
			return err
		}
		defer s.repl.close()
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "floor server on %s, log in %s\n", ln.Addr(), s.log.Name())
	return s.serve(ctx, ln)
}

func newFloorServer(dir string, size int64) (*floorServer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "floor.log"), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros, off); err != nil {
			_ = f.Close()
			return nil, err
		}
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return nil, err
	}
	root := &floorNode{kids: map[string]struct{}{}}
	return &floorServer{
		in: make(chan floorReq, 4096), log: f, size: size,
		nodes:      map[string]*floorNode{"/": root},
		ephemerals: map[int64]map[string]struct{}{},
		dataW:      map[string][]*floorConn{}, childW: map[string][]*floorConn{},
		out: map[*floorConn][]byte{},
	}, nil
}

// serve accepts connections until ctx ends; the committer and every connection's reader stop
// with it.
func (s *floorServer) serve(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { s.commitLoop(ctx) })
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	wg.Go(func() {
		<-ctx.Done()
		_ = ln.Close()
		mu.Lock()
		for nc := range conns {
			_ = nc.Close()
		}
		mu.Unlock()
	})
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		mu.Lock()
		conns[nc] = struct{}{}
		mu.Unlock()
		wg.Go(func() {
			s.readLoop(ctx, &floorConn{nc: nc})
			mu.Lock()
			delete(conns, nc)
			mu.Unlock()
		})
	}
}

func (s *floorServer) send(ctx context.Context, r floorReq) bool {
	r.c.pending.Add(1)
	select {
	case s.in <- r:
		return true
	case <-ctx.Done():
		return false
	}
}

// readLoop reads one connection's requests: reads are answered here unless a write of the
// connection is still in the committer, everything else goes to the committer.
func (s *floorServer) readLoop(ctx context.Context, c *floorConn) {
	connected := false
	defer func() {
		c.closed.Store(true)
		_ = c.nc.Close()
		if connected {
			s.send(ctx, floorReq{c: c, gone: true})
		}
	}()
	fr := jute.NewFrameReader(c.nc, 0)
	frame, err := fr.Next()
	if err != nil {
		return
	}
	var creq jute.ConnectRequest
	if jute.Unmarshal(frame, jute.DefaultMaxBuffer, &creq) != nil {
		return
	}
	if !s.send(ctx, floorReq{c: c, connect: &creq}) {
		return
	}
	connected = true
	for {
		frame, err := fr.Next()
		if err != nil {
			return
		}
		hdr, body, err := jute.DecodeRequest(frame, jute.DefaultMaxBuffer)
		if err != nil {
			return
		}
		if c.pending.Load() == 0 && floorRead(hdr.Type) {
			s.mu.Lock()
			s.execute(c, hdr, body)
			b := s.out[c]
			delete(s.out, c)
			s.mu.Unlock()
			c.write(b)
			continue
		}
		if !s.send(ctx, floorReq{c: c, hdr: hdr, body: body}) {
			return
		}
		// After a closeSession the committer closes the socket once it has answered.
	}
}

func floorRead(op jute.Op) bool {
	switch op {
	case jute.OpGetData, jute.OpExists, jute.OpGetChildren, jute.OpGetChildren2, jute.OpSync, jute.OpPing:
		return true
	}
	return false
}

// commitLoop logs each batch of requests with one write and one fdatasync, then applies and
// answers them in order.
func (s *floorServer) commitLoop(ctx context.Context) {
	var batch []floorReq
	var rec []byte
	for {
		select {
		case r := <-s.in:
			batch = append(batch[:0], r)
		case <-ctx.Done():
			return
		}
	drain:
		for len(batch) < 1024 {
			select {
			case r := <-s.in:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		rec = rec[:0]
		for _, r := range batch {
			switch {
			case r.connect != nil, r.gone, r.hdr.Type == jute.OpCloseSession:
				rec = append(rec, 's')
			case !floorRead(r.hdr.Type):
				rec = jute.AppendRequest(rec, r.hdr, r.body)
			}
		}
		if len(rec) > 0 {
			var seq int64
			if s.repl != nil {
				// The other nodes log the batch while this one does.
				var err error
				if seq, err = s.repl.send(rec); err != nil {
					fmt.Fprintln(os.Stderr, "zkbench floor: replicate:", err)
					return
				}
			}
			if err := s.logBatch(rec); err != nil {
				fmt.Fprintln(os.Stderr, "zkbench floor: log:", err)
				return
			}
			if s.repl != nil && !s.repl.wait(ctx, seq) {
				return
			}
		}
		s.mu.Lock()
		for _, r := range batch {
			switch {
			case r.connect != nil:
				s.lastSid++
				r.c.sid = s.lastSid
				resp := jute.ConnectResponse{TimeOut: r.connect.TimeOut, SessionID: r.c.sid, Passwd: make([]byte, 16)}
				s.out[r.c] = jute.AppendFrame(s.out[r.c], &resp)
			case r.gone:
				if r.c.sid != 0 {
					s.zxid++
					s.endSession(r.c.sid)
				}
			default:
				s.execute(r.c, r.hdr, r.body)
			}
		}
		out := s.out
		s.out = make(map[*floorConn][]byte, len(out))
		s.mu.Unlock()
		for c, b := range out {
			if len(b) > 0 && !c.closed.Load() {
				c.write(b)
			}
		}
		for _, r := range batch {
			if r.hdr.Type == jute.OpCloseSession && r.connect == nil && !r.gone {
				_ = r.c.nc.Close()
			}
			r.c.pending.Add(-1)
		}
	}
}

// servePprof serves the runtime's profiles on ln until stop is called; stop waits for the
// server to end.
func servePprof(ln net.Listener) (stop func()) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return func() { _ = srv.Close(); <-done }
}

// logBatch writes rec to the log, from its start again when the file is full, and makes it
// durable with one fdatasync.
func (s *floorServer) logBatch(rec []byte) error {
	if s.off+int64(len(rec)) > s.size {
		s.off = 0
	}
	if _, err := s.log.WriteAt(rec, s.off); err != nil {
		return err
	}
	s.off += int64(len(rec))
	return syscall.Fdatasync(int(s.log.Fd()))
}

// execute answers one request into s.out; s.mu is held.
func (s *floorServer) execute(c *floorConn, hdr jute.RequestHeader, body jute.Record) {
	var resp jute.Record
	code := jute.CodeOK
	zxid := s.zxid
	switch hdr.Type {
	case jute.OpPing:
	case jute.OpSync:
		resp = &jute.SyncResponse{Path: body.(*jute.SyncRequest).Path}
	case jute.OpGetData:
		req := body.(*jute.GetDataRequest)
		if n := s.nodes[req.Path]; n != nil {
			resp = &jute.GetDataResponse{Data: n.data, Stat: n.stat}
			if req.Watch {
				s.dataW[req.Path] = append(s.dataW[req.Path], c)
			}
		} else {
			code = jute.CodeNoNode
		}
	case jute.OpExists:
		req := body.(*jute.ExistsRequest)
		if req.Watch {
			s.dataW[req.Path] = append(s.dataW[req.Path], c)
		}
		if n := s.nodes[req.Path]; n != nil {
			resp = &jute.ExistsResponse{Stat: n.stat}
		} else {
			code = jute.CodeNoNode
		}
	case jute.OpGetChildren, jute.OpGetChildren2:
		req := body.(*jute.GetChildrenRequest)
		n := s.nodes[req.Path]
		if n == nil {
			code = jute.CodeNoNode
			break
		}
		kids := make([]string, 0, len(n.kids))
		for k := range n.kids {
			kids = append(kids, k)
		}
		if req.Watch {
			s.childW[req.Path] = append(s.childW[req.Path], c)
		}
		if hdr.Type == jute.OpGetChildren {
			resp = &jute.GetChildrenResponse{Children: kids}
		} else {
			resp = &jute.GetChildren2Response{Children: kids, Stat: n.stat}
		}
	case jute.OpCloseSession:
		s.zxid++
		s.endSession(c.sid)
		c.sid = 0
		zxid = s.zxid
	case jute.OpMulti:
		s.zxid++
		zxid = s.zxid
		resp = s.multi(c.sid, body.(*jute.MultiRequest))
	default:
		s.zxid++
		zxid = s.zxid
		resp, code = s.write(c.sid, hdr.Type, body, nil)
	}
	if code != jute.CodeOK {
		resp = nil
	}
	s.out[c] = jute.AppendReply(s.out[c], jute.ReplyHeader{Xid: hdr.Xid, Zxid: zxid, Err: code}, resp)
}

// multi applies every op of m or, if one fails, none.
func (s *floorServer) multi(sid int64, m *jute.MultiRequest) *jute.MultiResponse {
	var undo []func()
	var events []floorEvent
	s.held = &events
	defer func() { s.held = nil }()
	res := make([]jute.MultiResult, len(m.Ops))
	failed := -1
	for i, op := range m.Ops {
		resp, code := s.write(sid, op.Type, op.Req, &undo)
		if code != jute.CodeOK {
			failed = i
			res[i] = jute.MultiResult{Type: jute.OpError, Err: code, Resp: &jute.ErrorResponse{Err: code}}
			break
		}
		res[i] = jute.MultiResult{Type: op.Type, Resp: resp}
	}
	if failed < 0 {
		s.held = nil
		for _, e := range events {
			s.fire(e.w, e.p, e.ev)
		}
		return &jute.MultiResponse{Results: res}
	}
	for i := len(undo) - 1; i >= 0; i-- {
		undo[i]() // its events are held too, and dropped with the multi's
	}
	for i := range res {
		code := jute.CodeRuntimeInconsistency
		if i < failed {
			code = jute.CodeOK
		} else if i == failed {
			continue
		}
		res[i] = jute.MultiResult{Type: jute.OpError, Err: code, Resp: &jute.ErrorResponse{Err: code}}
	}
	return &jute.MultiResponse{Results: res}
}

// write applies one write; undo, if not nil, gets what reverses it (for a multi that fails later).
// Events go to s.out as they happen.
func (s *floorServer) write(sid int64, op jute.Op, body jute.Record, undo *[]func()) (jute.Record, jute.Code) {
	now := time.Now().UnixMilli()
	switch op {
	case jute.OpCreate, jute.OpCreate2:
		req := body.(*jute.CreateRequest)
		parent := s.nodes[path.Dir(req.Path)]
		if parent == nil {
			return nil, jute.CodeNoNode
		}
		p := req.Path
		if req.Flags.Sequential() {
			p += fmt.Sprintf("%010d", parent.stat.Cversion)
		}
		if s.nodes[p] != nil {
			return nil, jute.CodeNodeExists
		}
		n := &floorNode{data: req.Data, kids: map[string]struct{}{}, stat: jute.Stat{Czxid: s.zxid, Mzxid: s.zxid, Pzxid: s.zxid,
			Ctime: now, Mtime: now, DataLength: int32(len(req.Data))}}
		if req.Flags.Ephemeral() {
			n.stat.EphemeralOwner = sid
			if s.ephemerals[sid] == nil {
				s.ephemerals[sid] = map[string]struct{}{}
			}
			s.ephemerals[sid][p] = struct{}{}
		}
		s.link(p, n, parent)
		if undo != nil {
			*undo = append(*undo, func() { s.unlink(p, parent) })
		}
		if op == jute.OpCreate2 {
			return &jute.Create2Response{Path: p, Stat: n.stat}, jute.CodeOK
		}
		return &jute.CreateResponse{Path: p}, jute.CodeOK
	case jute.OpDelete:
		req := body.(*jute.DeleteRequest)
		n, code := s.versioned(req.Path, req.Version)
		if code == jute.CodeOK && len(n.kids) > 0 {
			code = jute.CodeNotEmpty
		}
		if code != jute.CodeOK {
			return nil, code
		}
		parent := s.nodes[path.Dir(req.Path)]
		s.unlink(req.Path, parent)
		if undo != nil {
			*undo = append(*undo, func() { s.link(req.Path, n, parent) })
		}
		return nil, jute.CodeOK
	case jute.OpSetData:
		req := body.(*jute.SetDataRequest)
		n, code := s.versioned(req.Path, req.Version)
		if code != jute.CodeOK {
			return nil, code
		}
		old, oldStat := n.data, n.stat
		n.data = req.Data
		n.stat.Version++
		n.stat.Mzxid, n.stat.Mtime, n.stat.DataLength = s.zxid, now, int32(len(req.Data))
		if undo != nil {
			*undo = append(*undo, func() { n.data, n.stat = old, oldStat })
		}
		s.fire(s.dataW, req.Path, jute.EventNodeDataChanged)
		return &jute.SetDataResponse{Stat: n.stat}, jute.CodeOK
	case jute.OpCheck:
		req := body.(*jute.CheckVersionRequest)
		_, code := s.versioned(req.Path, req.Version)
		return nil, code
	}
	return nil, jute.CodeUnimplemented
}

// versioned returns the node at p if it exists and version is -1 or its version.
func (s *floorServer) versioned(p string, version int32) (*floorNode, jute.Code) {
	n := s.nodes[p]
	switch {
	case n == nil:
		return nil, jute.CodeNoNode
	case version != -1 && version != n.stat.Version:
		return nil, jute.CodeBadVersion
	}
	return n, jute.CodeOK
}

func (s *floorServer) link(p string, n *floorNode, parent *floorNode) {
	s.nodes[p] = n
	parent.kids[path.Base(p)] = struct{}{}
	parent.stat.Cversion++
	parent.stat.NumChildren++
	parent.stat.Pzxid = s.zxid
	s.fire(s.dataW, p, jute.EventNodeCreated)
	s.fire(s.childW, path.Dir(p), jute.EventNodeChildrenChanged)
}

func (s *floorServer) unlink(p string, parent *floorNode) {
	n := s.nodes[p]
	delete(s.nodes, p)
	if o := n.stat.EphemeralOwner; o != 0 {
		delete(s.ephemerals[o], p)
	}
	delete(parent.kids, path.Base(p))
	parent.stat.Cversion++
	parent.stat.NumChildren--
	parent.stat.Pzxid = s.zxid
	s.fire(s.dataW, p, jute.EventNodeDeleted)
	s.fire(s.childW, p, jute.EventNodeDeleted)
	s.fire(s.childW, path.Dir(p), jute.EventNodeChildrenChanged)
}

// floorEvent is an event a multi holds until it has succeeded.
type floorEvent struct {
	w  map[string][]*floorConn
	p  string
	ev jute.EventType
}

// fire queues ev for every watch on p in w, once per connection, and clears them; inside a multi
// it holds the event until the multi has succeeded.
func (s *floorServer) fire(w map[string][]*floorConn, p string, ev jute.EventType) {
	if s.held != nil {
		*s.held = append(*s.held, floorEvent{w, p, ev})
		return
	}
	cs := w[p]
	if len(cs) == 0 {
		return
	}
	delete(w, p)
	for i, c := range cs {
		dup := false
		for _, d := range cs[:i] {
			dup = dup || d == c
		}
		if !dup && !c.closed.Load() {
			e := jute.WatcherEvent{Type: ev, State: jute.StateSyncConnected, Path: p}
			s.out[c] = jute.AppendReply(s.out[c], jute.ReplyHeader{Xid: -1, Zxid: -1}, &e)
		}
	}
}

// endSession deletes the session's ephemeral nodes.
func (s *floorServer) endSession(sid int64) {
	for p := range s.ephemerals[sid] {
		if n := s.nodes[p]; n != nil && len(n.kids) == 0 {
			s.unlink(p, s.nodes[path.Dir(p)])
		}
	}
	delete(s.ephemerals, sid)
}
