package server

import (
	"context"
	"fmt"
	"hash/fnv"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// member is one line of the dynamic configuration.
type member struct {
	id           int64
	peerAddr     string
	clientAddr   string
	electionPort int // 0: the peer port
}

// members returns the current voting members: the consensus configuration when there is one,
// with client addresses from the configuration and from reconfigs seen on this server.
func (s *Server) members() []member {
	var out []member
	if ps, err := s.cons.Members(); err == nil && len(ps) > 1 {
		s.clientAddrs.Lock()
		for _, p := range ps {
			id, err := strconv.ParseInt(p.ID, 10, 64)
			if err != nil {
				continue
			}
			out = append(out, member{id: id, peerAddr: p.Addr, clientAddr: s.clientAddrs.m[id], electionPort: s.clientAddrs.election[id]})
		}
		s.clientAddrs.Unlock()
		sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
		return out
	}
	for _, p := range s.cfg.Peers {
		out = append(out, member{id: p.ID, peerAddr: p.PeerAddr, clientAddr: p.ClientAddr, electionPort: p.ElectionPort})
	}
	return out
}

// configText is the membership as ZooKeeper writes it into /zookeeper/config: one
// server.N=host:quorumPort:electionPort:participant;clientHost:clientPort line per member, then
// version=<hex>. zkd uses one peer port for everything, so it appears as both ports. The version
// is a hash of the member lines, the same on every server for the same membership.
func (s *Server) configText() (string, int64) {
	var b strings.Builder
	for _, m := range s.members() {
		host, port, err := net.SplitHostPort(m.peerAddr)
		if err != nil {
			host, port = m.peerAddr, "0"
		}
		election := port
		if m.electionPort != 0 {
			election = strconv.Itoa(m.electionPort)
		}
		fmt.Fprintf(&b, "server.%d=%s:%s:%s:participant", m.id, host, port, election)
		if m.clientAddr != "" {
			fmt.Fprintf(&b, ";%s", m.clientAddr)
		}
		b.WriteByte('\n')
	}
	h := fnv.New64a()
	h.Write([]byte(b.String()))
	version := int64(h.Sum64() >> 1)
	fmt.Fprintf(&b, "version=%x\n", version)
	return b.String(), version
}

// reconfig applies a ZooKeeper reconfig onto the Raft membership: joining servers become voters
// (start them with Config.Join so they wait to be added), leaving ones are removed. It needs
// ReconfigEnabled and a cluster; the caller needs WRITE on /zookeeper/config.
func (c *conn) reconfig(ctx context.Context, hdr jute.RequestHeader, req *jute.ReconfigRequest, auth []jute.Id) {
	s := c.s
	v := s.view()
	switch {
	case !s.cfg.ReconfigEnabled:
		c.reply(hdr.Xid, v.Zxid(), jute.CodeReconfigDisabled, nil)
		return
	case len(s.cfg.Peers) <= 1:
		c.reply(hdr.Xid, v.Zxid(), jute.CodeUnimplemented, nil)
		return
	}
	if acl, ok := v.ACL(configPath); ok && !znode.CheckACL(acl, auth, jute.PermWrite) {
		c.reply(hdr.Xid, v.Zxid(), jute.CodeNoAuth, nil)
		return
	}
	cur := s.members()
	if req.CurConfigID != -1 {
		if _, version := s.configText(); version != req.CurConfigID {
			c.reply(hdr.Xid, v.Zxid(), jute.CodeBadVersion, nil)
			return
		}
	}
	joins, leaves, err := planReconfig(cur, req)
	if err != nil {
		c.reply(hdr.Xid, v.Zxid(), jute.CodeBadArguments, nil)
		return
	}
	if len(cur)+len(joins)-len(leaves) < 1 {
		c.reply(hdr.Xid, v.Zxid(), jute.CodeBadArguments, nil)
		return
	}
	for _, m := range joins {
		if err := s.cons.AddVoter(ctx, strconv.FormatInt(m.id, 10), m.peerAddr); err != nil {
			c.log.Info("reconfig: add voter failed", "id", m.id, "err", err)
			c.reply(hdr.Xid, v.Zxid(), jute.CodeNewConfigNoQuorum, nil)
			return
		}
		s.clientAddrs.Lock()
		if m.clientAddr != "" {
			s.clientAddrs.m[m.id] = m.clientAddr
		}
		s.clientAddrs.election[m.id] = m.electionPort
		s.clientAddrs.Unlock()
	}
	for _, id := range leaves {
		if err := s.cons.RemoveServer(ctx, strconv.FormatInt(id, 10)); err != nil {
			c.log.Info("reconfig: remove server failed", "id", id, "err", err)
			c.reply(hdr.Xid, v.Zxid(), jute.CodeNewConfigNoQuorum, nil)
			return
		}
	}
	// A follower learns the new configuration a moment after the leader committed it.
	s.awaitMembers(ctx, joins, leaves)
	c.log.Info("reconfig applied", "joined", len(joins), "left", len(leaves))
	// Watchers of /zookeeper/config learn of the change before the reply.
	s.checkConfigChange()
	v = s.view()
	text, _ := s.configText()
	st, _ := v.Stat(configPath)
	st.DataLength = int32(len(text))
	c.reply(hdr.Xid, v.Zxid(), jute.CodeOK, &jute.GetDataResponse{Data: []byte(text), Stat: st})
}

// planReconfig turns a reconfig request into members to add and ids to remove.
func planReconfig(cur []member, req *jute.ReconfigRequest) (joins []member, leaves []int64, err error) {
	have := map[int64]member{}
	for _, m := range cur {
		have[m.id] = m
	}
	parseList := func(s string) ([]member, error) {
		var out []member
		for item := range strings.SplitSeq(s, ",") {
			if item = strings.TrimSpace(item); item == "" {
				continue
			}
			m, err := parseMember(item)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		}
		return out, nil
	}
	if req.NewMembers != "" {
		want, err := parseList(req.NewMembers)
		if err != nil {
			return nil, nil, err
		}
		keep := map[int64]bool{}
		for _, m := range want {
			keep[m.id] = true
			if _, ok := have[m.id]; !ok {
				joins = append(joins, m)
			}
		}
		for id := range have {
			if !keep[id] {
				leaves = append(leaves, id)
			}
		}
		return joins, leaves, nil
	}
	if joins, err = parseList(req.JoiningServers); err != nil {
		return nil, nil, err
	}
	for item := range strings.SplitSeq(req.LeavingServers, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		id, err := strconv.ParseInt(item, 10, 64)
		if err != nil || id <= 0 {
			return nil, nil, fmt.Errorf("server: reconfig: bad leaving id %q", item)
		}
		if _, ok := have[id]; ok {
			leaves = append(leaves, id)
		}
	}
	return joins, leaves, nil
}

// parseMember parses server.N=host:quorumPort:electionPort[:role][;[clientHost:]clientPort].
func parseMember(s string) (member, error) {
	key, val, ok := strings.Cut(s, "=")
	if !ok || !strings.HasPrefix(key, "server.") {
		return member{}, fmt.Errorf("server: reconfig: bad server spec %q", s)
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(key, "server."), 10, 64)
	if err != nil || id <= 0 {
		return member{}, fmt.Errorf("server: reconfig: bad server id in %q", s)
	}
	addr, client, _ := strings.Cut(val, ";")
	f := strings.Split(addr, ":")
	if len(f) < 2 {
		return member{}, fmt.Errorf("server: reconfig: bad address in %q", s)
	}
	if _, err := strconv.ParseUint(f[1], 10, 16); err != nil {
		return member{}, fmt.Errorf("server: reconfig: bad port in %q", s)
	}
	m := member{id: id, peerAddr: net.JoinHostPort(f[0], f[1])}
	if len(f) >= 3 {
		if p, err := strconv.ParseUint(f[2], 10, 16); err == nil {
			m.electionPort = int(p)
		}
	}
	if client != "" {
		if !strings.Contains(client, ":") {
			client = "0.0.0.0:" + client
		}
		m.clientAddr = client
	}
	return m, nil
}

// awaitMembers waits (briefly) until this server's view of the membership has the joined
// members and lacks the leaving ones.
func (s *Server) awaitMembers(ctx context.Context, joins []member, leaves []int64) {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		have := map[int64]bool{}
		for _, m := range s.members() {
			have[m.id] = true
		}
		done := true
		for _, m := range joins {
			done = done && have[m.id]
		}
		for _, id := range leaves {
			done = done && !have[id]
		}
		if done {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkConfigChange fires NodeDataChanged on /zookeeper/config for this server's watchers when
// the membership changed since the last check. Every server runs it from housekeeping, so
// watchers learn of a reconfig whichever server handled it.
func (s *Server) checkConfigChange() {
	s.configSeen.Lock()
	defer s.configSeen.Unlock()
	_, version := s.configText()
	if s.configSeen.version == version {
		return
	}
	first := s.configSeen.version == 0
	s.configSeen.version = version
	if first {
		return
	}
	v := s.view()
	acl, _ := v.ACL(configPath)
	s.watches.fire(v.Zxid(), []znode.Event{{Type: jute.EventNodeDataChanged, Path: configPath, ACL: acl}})
}
