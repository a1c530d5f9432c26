package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// reply queues a reply for xid and counts it; the executor flushes it once the request is
// answered (executor). The reply to the request the executor is timing for the slow-request
// log is queued with it, so whoever writes it can tell when it left.
func (c *conn) reply(xid int32, zxid int64, code jute.Code, body jute.Record) {
	c.replyFrame(xid, zxid, code, body, false)
}

// replyFrame is reply; errBody keeps the body of an error reply, which only a failed sasl step
// has: ZooKeeper sends it a null token, and its Java client reads that token to learn that the
// authentication failed.
func (c *conn) replyFrame(xid int32, zxid int64, code jute.Code, body jute.Record, errBody bool) {
	if r := c.answering; r != nil {
		c.recordLatency(r)
	}
	timed := c.timing
	if timed != nil {
		timed.answered = time.Since(timed.arrived)
		c.timing = nil
	}
	var size int
	var ok bool
	if errBody {
		size, ok = c.out.push(false, timed, &jute.ReplyHeader{Xid: xid, Zxid: zxid, Err: code}, body)
	} else {
		size, ok = c.out.pushReply(jute.ReplyHeader{Xid: xid, Zxid: zxid, Err: code}, body, timed)
	}
	if !ok {
		c.abort(closeSlowConsumer, errSlowConsumer)
		return
	}
	c.s.m.response(size)
	c.stats.sent.Add(1)
	c.s.m.packetsSent.Inc()
	c.stats.lastZxid.Store(zxid)
	c.stats.lastResp.Store(time.Now().UnixMilli())
}

// recordLatency records the latency of r, which complete is answering: in the connection's figures
// (cons) and the server's (a read or an update, and by op).
func (c *conn) recordLatency(r *request) {
	c.answering = nil
	d := time.Since(r.arrived)
	c.s.m.request(r.hdr.Type, r.pending != nil, d)
	ms := d.Milliseconds()
	c.stats.lastLatency.Store(ms)
	c.stats.sumLatency.Add(ms)
	if n := c.stats.count.Add(1); n == 1 || ms < c.stats.minLatency.Load() {
		c.stats.minLatency.Store(ms)
	}
	if ms > c.stats.maxLatency.Load() {
		c.stats.maxLatency.Store(ms)
	}
}

// execute runs one request that is neither a write nor handled on arrival: reads, ping, sync,
// watch management and whoAmI. It runs on the connection's executor, after every earlier
// request of the connection completed.
func (c *conn) execute(ctx context.Context, hdr jute.RequestHeader, body jute.Record, auth []jute.Id) {
	s := c.s
	switch hdr.Type {
	case jute.OpPing:
		c.reply(jute.XidPing, s.view().Zxid(), jute.CodeOK, nil)
	case jute.OpSync:
		sctx, cancel := context.WithTimeout(ctx, time.Duration(c.timeout.Load())*time.Millisecond)
		err := s.cons.Sync(sctx)
		cancel()
		if err != nil {
			c.abort(closeNotServing, fmt.Errorf("server: sync: %w", err))
			return
		}
		c.reply(hdr.Xid, s.view().Zxid(), jute.CodeOK, &jute.SyncResponse{Path: body.(*jute.SyncRequest).Path})
	case jute.OpSetWatches:
		r := body.(*jute.SetWatches)
		c.setWatches(hdr.Xid, r.RelativeZxid, r.DataWatches, r.ExistWatches, r.ChildWatches, nil, nil)
	case jute.OpSetWatches2:
		r := body.(*jute.SetWatches2)
		c.setWatches(hdr.Xid, r.RelativeZxid, r.DataWatches, r.ExistWatches, r.ChildWatches,
			r.PersistentWatches, r.PersistentRecursiveWatches)
	case jute.OpAddWatch:
		r := body.(*jute.AddWatchRequest)
		var mode watchMode
		switch r.Mode {
		case jute.AddWatchPersistent:
			mode = watchPersistent
		case jute.AddWatchPersistentRecursive:
			mode = watchRecursive
		default:
			c.reply(hdr.Xid, s.view().Zxid(), jute.CodeMarshallingError, nil)
			return
		}
		s.watches.add(c, r.Path, mode)
		c.reply(hdr.Xid, s.view().Zxid(), jute.CodeOK, &jute.ErrorResponse{Err: jute.CodeOK})
	case jute.OpCheckWatches, jute.OpRemoveWatches:
		var path string
		var typ jute.WatcherType
		if r, ok := body.(*jute.CheckWatchesRequest); ok {
			path, typ = r.Path, r.Type
		} else {
			r := body.(*jute.RemoveWatchesRequest)
			path, typ = r.Path, r.Type
		}
		mode, ok := modesFor(typ)
		if !ok {
			c.reply(hdr.Xid, s.view().Zxid(), jute.CodeMarshallingError, nil)
			return
		}
		code := jute.CodeOK
		if !s.watches.remove(c, path, mode, hdr.Type == jute.OpCheckWatches) {
			code = jute.CodeNoWatcher
		}
		c.reply(hdr.Xid, s.view().Zxid(), code, nil)
	case jute.OpWhoAmI:
		ids := auth // already in ZooKeeper's order (addAuth)
		infos := make([]jute.ClientInfo, 0, len(ids))
		for _, id := range ids {
			user := id.ID
			if id.Scheme == "super" {
				user = "" // ZooKeeper has no provider to name it (an x509 super user's id is its DN)
			}
			if id.Scheme == "digest" {
				if i := indexByte(user, ':'); i >= 0 {
					user = user[:i]
				}
			}
			infos = append(infos, jute.ClientInfo{AuthScheme: id.Scheme, User: user})
		}
		c.reply(hdr.Xid, s.view().Zxid(), jute.CodeOK, &jute.WhoAmIResponse{ClientInfo: infos})
	case jute.OpReconfig:
		c.reconfig(ctx, hdr, body.(*jute.ReconfigRequest), auth)
	default:
		c.read(hdr, body, auth)
	}
}

func indexByte(s string, b byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return i
		}
	}
	return -1
}

// read serves a read from the published view and registers its watch. If a transaction was
// applied between the view and the registration, the read is done again on a newer view, so the
// watch cannot miss a change.
func (c *conn) read(hdr jute.RequestHeader, body jute.Record, auth []jute.Id) {
	s := c.s
	if z := c.eventZxid.Load(); s.view().Zxid() < z && s.awaitView(z, c.stopped) == nil {
		return // the connection ended while the read waited
	}
	for {
		v := s.view()
		resp, err := readView(v, c.session(), auth, hdr.Type, body)
		code := codeFor(err)
		if code == jute.CodeOK {
			resp = s.withConfigData(hdr.Type, body, resp)
		}
		if hdr.Type == jute.OpMultiRead && code != jute.CodeOK && resp != nil {
			// The one error reply with a body: a write op inside multiRead.
			if !c.out.pushFrame(&jute.ReplyHeader{Xid: hdr.Xid, Zxid: v.Zxid(), Err: code}, resp) {
				c.abort(closeSlowConsumer, errSlowConsumer)
			}
			return
		}
		path, mode := watchFor(hdr.Type, body, code)
		if mode == 0 {
			c.reply(hdr.Xid, v.Zxid(), code, resp)
			return
		}
		// The reply is queued under the watch lock, so no event of a later change can slip in
		// between the registration and the reply.
		if s.watches.registerAll(c, v.Zxid(), func(add func(string, watchMode)) {
			add(path, mode)
			c.reply(hdr.Xid, v.Zxid(), code, resp)
		}) {
			return
		}
		// A transaction was applied after v (its events are queued): read again on the view
		// that holds it, once it is published (with the rest of its batch).
		if s.awaitView(v.Zxid()+1, c.stopped) == nil {
			return
		}
	}
}

// readView serves a read from v: getChildren and getChildren2 from the node's child list as is
// (childrenReply), every other read through View.Read.
func readView(v *znode.View, session int64, auth []jute.Id, op jute.Op, body jute.Record) (jute.Record, error) {
	switch r := body.(type) {
	case *jute.GetChildrenRequest:
		if op == jute.OpGetChildren && r != nil {
			kids, _, err := v.Children(r.Path, auth)
			if err != nil {
				return nil, err
			}
			return &childrenReply{kids: kids}, nil
		}
	case *jute.GetChildren2Request:
		if op == jute.OpGetChildren2 && r != nil {
			kids, stat, err := v.Children(r.Path, auth)
			if err != nil {
				return nil, err
			}
			return &childrenReply{kids: kids, stat: &stat}, nil
		}
	}
	return v.Read(session, auth, op, body)
}

// watchFor returns the watch a read leaves behind, if any: exists leaves a data watch even on a
// missing node, getData and getChildren only on success.
func watchFor(op jute.Op, body jute.Record, code jute.Code) (string, watchMode) {
	switch r := body.(type) {
	case *jute.ExistsRequest:
		if r.Watch && (code == jute.CodeOK || code == jute.CodeNoNode) {
			return r.Path, watchData
		}
	case *jute.GetDataRequest:
		if op == jute.OpGetData && r.Watch && code == jute.CodeOK {
			return r.Path, watchData
		}
	case *jute.GetChildrenRequest:
		if r.Watch && code == jute.CodeOK {
			return r.Path, watchChild
		}
	case *jute.GetChildren2Request:
		if r.Watch && code == jute.CodeOK {
			return r.Path, watchChild
		}
	}
	return "", 0
}

// codeFor is the one place an error becomes a wire code. znode and consensus return jute.Code
// values (possibly wrapped); anything else is a system error.
func codeFor(err error) jute.Code {
	if err == nil {
		return jute.CodeOK
	}
	var code jute.Code
	if errors.As(err, &code) {
		return code
	}
	return jute.CodeSystemError
}

// setWatches re-registers a reconnecting client's watches with ZooKeeper's catch-up rules:
// events for what changed after relativeZxid are sent before the reply (zxid -1, no ACL
// filter); the rest are registered.
func (c *conn) setWatches(xid int32, rel int64, data, exist, child, persistent, recursive []string) {
	s := c.s
	for {
		v := s.view()
		type pending struct {
			typ  jute.EventType
			path string
		}
		var events []pending
		type reg struct {
			path string
			mode watchMode
		}
		var regs []reg
		for _, p := range data {
			st, ok := v.Stat(p)
			switch {
			case !ok:
				events = append(events, pending{jute.EventNodeDeleted, p})
			case st.Mzxid > rel:
				events = append(events, pending{jute.EventNodeDataChanged, p})
			default:
				regs = append(regs, reg{p, watchData})
			}
		}
		for _, p := range exist {
			if _, ok := v.Stat(p); ok {
				events = append(events, pending{jute.EventNodeCreated, p})
			} else {
				regs = append(regs, reg{p, watchData})
			}
		}
		for _, p := range child {
			st, ok := v.Stat(p)
			switch {
			case !ok:
				events = append(events, pending{jute.EventNodeDeleted, p})
			case st.Pzxid > rel:
				events = append(events, pending{jute.EventNodeChildrenChanged, p})
			default:
				regs = append(regs, reg{p, watchChild})
			}
		}
		for _, p := range persistent {
			regs = append(regs, reg{p, watchPersistent})
		}
		for _, p := range recursive {
			regs = append(regs, reg{p, watchRecursive})
		}
		if s.watches.registerAll(c, v.Zxid(), func(add func(string, watchMode)) {
			for _, r := range regs {
				add(r.path, r.mode)
			}
			hdr := jute.ReplyHeader{Xid: jute.XidNotification, Zxid: -1}
			for _, e := range events {
				if !c.out.pushFrame(&hdr, &jute.WatcherEvent{Type: e.typ, State: jute.StateSyncConnected, Path: e.path}) {
					c.abort(closeSlowConsumer, errSlowConsumer)
					return
				}
			}
			c.reply(xid, v.Zxid(), jute.CodeOK, nil)
		}) {
			return
		}
		if s.awaitView(v.Zxid()+1, c.stopped) == nil {
			return
		}
	}
}

// configPath is ZooKeeper's dynamic configuration node.
const configPath = "/zookeeper/config"

// withConfigData fills a getData reply for /zookeeper/config with the cluster's membership in
// ZooKeeper's dynamic-config format (empty on a standalone server, as in ZooKeeper).
func (s *Server) withConfigData(op jute.Op, body, resp jute.Record) jute.Record {
	if op != jute.OpGetData || len(s.cfg.Peers) <= 1 {
		return resp
	}
	req, ok := body.(*jute.GetDataRequest)
	gd, ok2 := resp.(*jute.GetDataResponse)
	if !ok || !ok2 || req.Path != configPath {
		return resp
	}
	out := *gd
	text, _ := s.configText()
	out.Data = []byte(text)
	out.Stat.DataLength = int32(len(out.Data))
	return &out
}
