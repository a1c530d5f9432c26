package znode

import (
	"errors"
	"strconv"
	"strings"

	"github.com/zkd-io/zkd/jute"
)

// maxTTL is the largest ttl a TTL node may have (40 bits, as ZooKeeper stores it).
const maxTTL = 0xFFFFFFFFFF

// applier applies one transaction to a working copy of the current View. Nothing it builds is
// visible to readers until Apply (or the Batch) publishes it, so a failed write or multi is undone
// by dropping it.
type applier struct {
	t      *Tree
	v      View // the working state
	zxid   int64
	txn    *Txn
	events []Event
	closed []int64
	// tr is set while a multi, or a single op of a Batch, is applied: the nodes in owned and the
	// child B-tree nodes tr owns were made by this multi (or this batch) and are not reachable
	// from any View yet, so later ops change them in place rather than copying them again (see
	// own). A failed multi drops them with the working state, as it drops copies.
	tr       *transient
	owned    []*node
	ownedExt []*nodeExt
	// The last find's walk (see find): the path, its target, and the working root and rewrite
	// count it was made on; its ancestors and segments are in t.chain and t.segs.
	walked   string
	walkLast *node
	walkRoot *node
	walkGen  int
	rewrites int
}

// maxOwned bounds the nodes a multi or a batch changes in place (their lookup is a linear scan).
const maxOwned = 32

// own returns the node to change in place of n: n itself if this Apply made it (a multi's
// earlier op copied it), otherwise a copy, which later ops of a multi may change in place.
// A caller must read what it needs of n's old state before calling.
func (a *applier) own(n *node) *node {
	if a.tr != nil {
		for _, o := range a.owned {
			if o == n {
				return n
			}
		}
	}
	c := *n
	if a.tr != nil && len(a.owned) < maxOwned {
		a.owned = append(a.owned, &c)
	}
	return &c
}

// ext returns the nodeExt of c, a node the applier owns, for the caller to change: c.x itself if
// this multi made it for c, otherwise a copy (or the defaults) stored in c.x. Like own, it lets a
// multi's later ops change what its earlier ops made instead of copying it again.
func (a *applier) ext(c *node) *nodeExt {
	if a.tr != nil && c.x != nil {
		for _, x := range a.ownedExt {
			if x == c.x {
				return x
			}
		}
	}
	x := c.ext()
	c.x = x
	if a.tr != nil && len(a.ownedExt) < maxOwned {
		a.ownedExt = append(a.ownedExt, x)
	}
	return x
}

// Apply applies txn as transaction zxid and publishes the new state. It must not be called
// concurrently with itself or with a Batch. A write that fails still advances LastZxid to zxid and
// changes nothing else. Apply copies what it keeps of txn.Req, so txn may alias a buffer the caller
// reuses or changes once Apply returns.
func (t *Tree) Apply(zxid int64, txn *Txn) Result {
	b := Batch{t: t, v: *t.cur.Load()}
	res := b.Apply(zxid, txn)
	b.Publish()
	return res
}

// Batch applies a run of transactions to a working state that no View shows until Publish. Its
// single creates, setData and deletes change in place the copies that earlier transactions of the
// same batch made (one transient for the whole batch, as a multi has for its ops), so a batch of
// writes under one parent copies the parent and its ancestors once rather than once per write.
// Those three ops check everything before they change anything, so a failed one leaves nothing to
// undo; any other transaction copies what it changes, or uses a transient of its own (a multi),
// and a failed one is undone by dropping its copies, as in Apply.
//
// A Batch is used by one goroutine and never concurrently with Apply or another Batch of the same
// tree; after Publish it must not be used again.
type Batch struct {
	t        *Tree
	v        View
	tr       *transient // nil in Apply, which has no later transactions to share copies with
	owned    []*node
	ownedExt []*nodeExt
}

// Batch starts a batch on the current state.
func (t *Tree) Batch() *Batch {
	b := &Batch{t: t, v: *t.cur.Load()}
	if !t.noTransients {
		b.tr = new(transient)
	}
	return b
}

// Publish makes everything the batch applied visible at once and returns the new View.
func (b *Batch) Publish() *View {
	nv := b.v
	b.t.cur.Store(&nv)
	b.tr, b.owned, b.ownedExt = nil, nil, nil
	return &nv
}

// Apply applies txn as transaction zxid to the batch's working state, with the results and
// failures of Tree.Apply; the change is visible once the batch is published.
func (b *Batch) Apply(zxid int64, txn *Txn) Result {
	old := b.v
	if txn == nil {
		b.v.zxid = zxid
		return Result{Zxid: zxid, Err: jute.CodeMarshallingError}
	}
	a := applier{t: b.t, v: old, zxid: zxid, txn: txn}
	a.v.zxid = zxid
	shared := false
	switch {
	case txn.Op == jute.OpMulti && !b.t.noTransients:
		a.tr = new(transient)
	case b.tr != nil && checksFirst(txn.Op):
		a.tr, a.owned, a.ownedExt, shared = b.tr, b.owned, b.ownedExt, true
	}
	var (
		sess   *session
		resp   jute.Record
		commit bool
		err    error
	)
	if txn.Session != 0 && txn.Op.IsClientWrite() {
		sess, err = a.admitSession()
		if sess != nil {
			a.v.sessions, _ = a.v.sessions.set(sess)
		}
	}
	if err == nil {
		resp, commit, err = a.dispatch()
	}
	res := Result{Zxid: zxid, Err: err}
	if err == nil {
		res.Resp = resp
	}
	if err != nil || !commit {
		a.v = old
		a.v.zxid = zxid
		if sess != nil {
			// The write failed but took its place in the session's order.
			a.v.sessions, _ = a.v.sessions.set(sess)
		}
	} else {
		res.Events, res.Closed = a.events, a.closed
		if shared {
			b.owned, b.ownedExt = a.owned, a.ownedExt
		}
	}
	b.v = a.v
	return res
}

// checksFirst reports whether op, as a single transaction, makes all its checks before it changes
// anything, so that it may change a batch's earlier copies in place: when it fails, it has changed
// nothing. (A multi may fail after its first ops changed nodes; it has a transient of its own.)
func checksFirst(op jute.Op) bool {
	switch op {
	case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL, jute.OpDelete,
		jute.OpSetData:
		return true
	}
	return false
}

func (a *applier) dispatch() (jute.Record, bool, error) {
	txn := a.txn
	switch txn.Op {
	case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer:
		req, ok := txn.Req.(*jute.CreateRequest)
		if !ok || req == nil {
			return nil, false, jute.CodeMarshallingError
		}
		res, err := a.create(txn.Op, req.Path, req.Data, req.ACL, req.Flags, 0, false)
		return res.resp, true, err
	case jute.OpCreateTTL:
		req, ok := txn.Req.(*jute.CreateTTLRequest)
		if !ok || req == nil {
			return nil, false, jute.CodeMarshallingError
		}
		res, err := a.create(txn.Op, req.Path, req.Data, req.ACL, req.Flags, req.TTL, false)
		return res.resp, true, err
	case jute.OpDelete:
		req, ok := txn.Req.(*jute.DeleteRequest)
		if !ok || req == nil {
			return nil, false, jute.CodeMarshallingError
		}
		return nil, true, a.delete(req.Path, req.Version)
	case jute.OpSetData:
		req, ok := txn.Req.(*jute.SetDataRequest)
		if !ok || req == nil {
			return nil, false, jute.CodeMarshallingError
		}
		st, err := a.setData(req.Path, req.Data, req.Version)
		if err != nil {
			return nil, false, err
		}
		return &jute.SetDataResponse{Stat: st}, true, nil
	case jute.OpSetACL:
		req, ok := txn.Req.(*jute.SetACLRequest)
		if !ok || req == nil {
			return nil, false, jute.CodeMarshallingError
		}
		st, err := a.setACL(req.Path, req.ACL, req.Version)
		if err != nil {
			return nil, false, err
		}
		return &jute.SetACLResponse{Stat: st}, true, nil
	case jute.OpMulti:
		req, ok := txn.Req.(*jute.MultiRequest)
		if !ok || req == nil {
			return nil, false, jute.CodeMarshallingError
		}
		return a.multi(req)
	case jute.OpCreateSession:
		req, ok := txn.Req.(*CreateSession)
		if !ok || req == nil {
			return nil, false, jute.CodeMarshallingError
		}
		a.createSession(req)
		return nil, true, nil
	case jute.OpCloseSession:
		switch req := txn.Req.(type) {
		case nil:
			a.closeSessions([]int64{txn.Session})
		case *CloseSessions:
			if req == nil {
				return nil, false, jute.CodeMarshallingError
			}
			a.closeSessions(req.IDs)
		default:
			return nil, false, jute.CodeMarshallingError
		}
		return nil, true, nil
	case jute.OpDeleteContainer:
		switch req := txn.Req.(type) {
		case *Reap:
			if req == nil {
				return nil, false, jute.CodeMarshallingError
			}
			a.reap(req)
			return nil, true, nil
		case *jute.DeleteContainerRequest:
			if req == nil {
				return nil, false, jute.CodeMarshallingError
			}
			return nil, true, a.deleteContainer(req.Path)
		}
		return nil, false, jute.CodeMarshallingError
	}
	// Top-level check and every op that is not a write.
	return nil, false, jute.CodeUnimplemented
}

// createResult is a successful create: the reply for the op as sent.
type createResult struct {
	resp jute.Record
}

func (a *applier) create(op jute.Op, path string, data []byte, acl []jute.ACL, mode jute.CreateMode, ttl int64, inMulti bool) (createResult, error) {
	if a.txn.NoTTL && (op == jute.OpCreateTTL || (op != jute.OpCreateContainer && mode.TTL())) {
		return createResult{}, jute.CodeUnimplemented
	}
	if !mode.Valid() {
		return createResult{}, jute.CodeBadArguments
	}
	// ZooKeeper's validateCreateRequest: a TTL goes with the TTL modes and only with them (ops
	// other than createTTL carry none), and the ephemeral flags need a live session whatever the
	// op. The node's kind then comes from the op (createContainer, createTTL) or the flags; the
	// sequential flag is honoured by every op.
	if op == jute.OpCreateTTL {
		if !mode.TTL() || ttl <= 0 || ttl > maxTTL {
			return createResult{}, jute.CodeBadArguments
		}
	} else if mode.TTL() {
		return createResult{}, jute.CodeBadArguments
	}
	if mode.Ephemeral() {
		if _, ok := a.v.sessions.get(a.txn.Session); !ok {
			return createResult{}, jute.CodeSessionExpired
		}
	}
	kind := kindPersistent
	switch {
	case op == jute.OpCreateTTL:
		kind = kindTTL
	case op == jute.OpCreateContainer, mode == jute.ModeContainer && inMulti:
		kind = kindContainer
	case mode.Ephemeral():
		kind = kindEphemeral
	}
	parentPath, _, ok := splitParent(path)
	if !ok {
		return createResult{}, jute.CodeBadArguments
	}
	fixed, err := fixupACL(acl, a.txn.Auth, a.txn.SASLACL)
	if err != nil {
		return createResult{}, err
	}
	parent := a.find(parentPath)
	if parent == nil {
		return createResult{}, jute.CodeNoNode
	}
	if !CheckACL(parent.acl.list, a.txn.Auth, jute.PermCreate) {
		return createResult{}, jute.CodeNoAuth
	}
	if mode.Sequential() {
		path = sequentialPath(path, parent.cversion())
	}
	if err := ValidatePath(path); err != nil {
		return createResult{}, err
	}
	name := path[strings.LastIndexByte(path, '/')+1:]
	if name == "" { // only "/" gets here
		return createResult{}, jute.CodeNodeExists
	}
	if len(name) > maxNameLen {
		return createResult{}, jute.CodeBadArguments
	}
	if _, exists := parent.kids.get(name); exists {
		return createResult{}, jute.CodeNodeExists
	}
	if parent.kind() == kindEphemeral {
		return createResult{}, jute.CodeNoChildrenForEphemerals
	}

	n := newNode(name, data, kind, a.t.acls.intern(fixed), a.zxid, a.txn.Time)
	var owner int64 // the session of an ephemeral, the ttl of a TTL node
	switch kind {
	case kindEphemeral:
		owner = a.txn.Session
	case kindTTL:
		owner = ttl
	}
	n.setExt(nodeExt{mzxid: a.zxid, mtime: a.txn.Time, pzxid: a.zxid, owner: owner})
	a.rewrite(parentPath, func(p *node) *node {
		c := a.own(p)
		c.kids, _ = c.kids.setIn(a.tr, n)
		x := a.ext(c)
		x.numChildren++
		x.cversion++
		x.pzxid = a.zxid
		return c
	})
	a.v.nodes++
	a.v.dataSize += int64(len(path) + len(data))
	switch kind {
	case kindEphemeral:
		a.v.ephemerals++
		s, _ := a.v.sessions.get(n.owner())
		ns := *s
		ns.ephemerals, _ = ns.ephemerals.set(pathKey(path))
		a.v.sessions, _ = a.v.sessions.set(&ns)
	case kindContainer:
		a.v.containers, _ = a.v.containers.set(pathKey(path))
	case kindTTL:
		a.v.ttls, _ = a.v.ttls.set(pathKey(path))
	}
	a.quotaCreated(path, parentPath, n.name(), len(data))
	a.events = append(a.events,
		Event{Type: jute.EventNodeCreated, Path: path, ACL: n.acl.list},
		Event{Type: jute.EventNodeChildrenChanged, Path: parentPath, ACL: parent.acl.list})

	if op == jute.OpCreate && !(inMulti && kind == kindContainer) {
		return createResult{resp: &jute.CreateResponse{Path: path}}, nil
	}
	return createResult{resp: &jute.Create2Response{Path: path, Stat: n.stat()}}, nil
}

// sequentialPath appends the parent's child-creation counter as ZooKeeper's String.format("%010d")
// does, negative values (after the signed 32-bit wrap) included.
func sequentialPath(path string, counter int32) string {
	var buf [11]byte
	digits := strconv.AppendInt(buf[:0], int64(counter), 10)
	neg := counter < 0
	if neg {
		digits = digits[1:]
	}
	var b strings.Builder
	b.Grow(len(path) + 11)
	b.WriteString(path)
	if neg {
		b.WriteByte('-')
	}
	width := 10
	if neg {
		width = 9
	}
	for i := len(digits); i < width; i++ {
		b.WriteByte('0')
	}
	b.Write(digits)
	return b.String()
}

func (a *applier) delete(path string, version int32) error {
	parentPath, _, ok := splitParent(path)
	if !ok || isSpecial(path) {
		return jute.CodeBadArguments
	}
	parent := a.v.lookup(parentPath)
	if parent == nil {
		return jute.CodeNoNode
	}
	if !CheckACL(parent.acl.list, a.txn.Auth, jute.PermDelete) {
		return jute.CodeNoAuth
	}
	n := a.find(path)
	if n == nil {
		return jute.CodeNoNode
	}
	if version != -1 && version != n.version() {
		return jute.CodeBadVersion
	}
	if n.numChildren() > 0 {
		return jute.CodeNotEmpty
	}
	a.remove(path, parentPath, n, true)
	return nil
}

// deleteContainer is the deleteContainer op as a client may send it: no ACL check, refused for
// nodes with children and for session ephemerals.
func (a *applier) deleteContainer(path string) error {
	parentPath, _, ok := splitParent(path)
	if !ok || isSpecial(path) {
		return jute.CodeBadArguments
	}
	n := a.find(path)
	if n == nil {
		return jute.CodeNoNode
	}
	if n.numChildren() > 0 {
		return jute.CodeNotEmpty
	}
	if n.kind() == kindEphemeral {
		return jute.CodeBadVersion
	}
	a.remove(path, parentPath, n, true)
	return nil
}

// remove deletes the childless node n at path and records the events. untrack says whether to drop
// an ephemeral from its session's set (closing a session drops the whole set instead).
func (a *applier) remove(path, parentPath string, n *node, untrack bool) {
	var parentACL []jute.ACL
	a.rewrite(parentPath, func(p *node) *node {
		parentACL = p.acl.list
		c := a.own(p)
		c.kids, _ = c.kids.delete(n.name())
		x := a.ext(c)
		x.numChildren--
		x.pzxid = a.zxid
		return c
	})
	a.v.nodes--
	a.v.dataSize -= int64(len(path) + n.dataLen())
	switch n.kind() {
	case kindEphemeral:
		a.v.ephemerals--
		if untrack {
			if s, ok := a.v.sessions.get(n.owner()); ok {
				ns := *s
				ns.ephemerals, _ = ns.ephemerals.delete(path)
				a.v.sessions, _ = a.v.sessions.set(&ns)
			}
		}
	case kindContainer:
		a.v.containers, _ = a.v.containers.delete(path)
	case kindTTL:
		a.v.ttls, _ = a.v.ttls.delete(path)
	}
	a.quotaRemoved(path, parentPath, n.name(), n.dataLen())
	a.events = append(a.events,
		Event{Type: jute.EventNodeDeleted, Path: path, ACL: n.acl.list},
		Event{Type: jute.EventNodeChildrenChanged, Path: parentPath, ACL: parentACL})
}

func (a *applier) setData(path string, data []byte, version int32) (jute.Stat, error) {
	if err := ValidatePath(path); err != nil {
		return jute.Stat{}, err
	}
	n := a.find(path)
	if n == nil {
		return jute.Stat{}, jute.CodeNoNode
	}
	if !CheckACL(n.acl.list, a.txn.Auth, jute.PermWrite) {
		return jute.Stat{}, jute.CodeNoAuth
	}
	if version != -1 && version != n.version() {
		return jute.Stat{}, jute.CodeBadVersion
	}
	var st jute.Stat
	grew := int64(len(data) - n.dataLen()) // before rewrite, which may change n in place
	a.rewrite(path, func(p *node) *node {
		c := a.own(p)
		c.setData(data)
		x := a.ext(c)
		x.version++
		x.mzxid = a.zxid
		x.mtime = a.txn.Time
		st = c.stat()
		return c
	})
	a.v.dataSize += grew
	a.chargeQuota(path, grew, 0)
	a.events = append(a.events, Event{Type: jute.EventNodeDataChanged, Path: path, ACL: n.acl.list})
	return st, nil
}

func (a *applier) setACL(path string, acl []jute.ACL, version int32) (jute.Stat, error) {
	if err := ValidatePath(path); err != nil {
		return jute.Stat{}, err
	}
	fixed, err := fixupACL(acl, a.txn.Auth, a.txn.SASLACL)
	if err != nil {
		return jute.Stat{}, err
	}
	n := a.find(path)
	if n == nil {
		return jute.Stat{}, jute.CodeNoNode
	}
	if !CheckACL(n.acl.list, a.txn.Auth, jute.PermAdmin) {
		return jute.Stat{}, jute.CodeNoAuth
	}
	if version != -1 && version != n.aversion() {
		return jute.Stat{}, jute.CodeBadVersion
	}
	set := a.t.acls.intern(fixed)
	var st jute.Stat
	a.rewrite(path, func(p *node) *node {
		c := a.own(p)
		c.acl = set
		a.ext(c).aversion++
		st = c.stat()
		return c
	})
	return st, nil
}

func (a *applier) check(path string, version int32) error {
	if err := ValidatePath(path); err != nil {
		return err
	}
	n := a.v.lookup(path)
	if n == nil {
		return jute.CodeNoNode
	}
	if !CheckACL(n.acl.list, a.txn.Auth, jute.PermRead) {
		return jute.CodeNoAuth
	}
	if version != -1 && version != n.version() {
		return jute.CodeBadVersion
	}
	return nil
}

// find is View.lookup that remembers its walk: a rewrite of the same path, or of its parent,
// made before anything else changes the tree starts from the ancestors found here instead of
// descending again (setData and setACL look a node up and then rewrite it; create rewrites the
// parent it looked up; delete rewrites the parent of the node it looked up).
func (a *applier) find(path string) *node {
	a.walked = ""
	if path == "/" || len(path) < 2 || path[0] != '/' {
		return a.v.lookup(path)
	}
	segs := segments(path, a.t.segs)
	chain := append(a.t.chain[:0], a.v.root)
	n := a.v.root
	for i, s := range segs {
		c, ok := n.kids.get(s)
		if !ok || s == "" {
			n = nil
			break
		}
		if i < len(segs)-1 {
			chain = append(chain, c)
		}
		n = c
	}
	a.t.segs, a.t.chain = segs, chain
	if n != nil {
		a.walked, a.walkLast, a.walkRoot, a.walkGen = path, n, a.v.root, a.rewrites
	}
	return n
}

// walkTo returns the segments of path, its ancestors from the root and the node itself from the
// last find, if that walk still holds for path: nothing was rewritten since, and path is the
// path found or its parent (not a further ancestor).
func (a *applier) walkTo(path string) (segs []string, chain []*node, last *node, ok bool) {
	if a.walked == "" || a.walkGen != a.rewrites || a.walkRoot != a.v.root || a.t.freshWalks {
		return nil, nil, nil, false
	}
	segs, chain = a.t.segs, a.t.chain
	switch {
	case path == a.walked:
		return segs, chain, a.walkLast, true
	case len(segs) > 1 && strings.LastIndexByte(a.walked, '/') == len(path) && a.walked[:len(path)] == path:
		k := len(chain) - 1
		return segs[:k], chain[:k], chain[k], true
	}
	return nil, nil, nil, false
}

// rewrite replaces the node at path (which must exist) with fn's copy of it, copies every ancestor
// to point at the new child.
func (a *applier) rewrite(path string, fn func(*node) *node) {
	defer func() { a.rewrites++; a.walked = "" }()
	if path == "/" {
		a.v.root = fn(a.v.root)
		return
	}
	segs, chain, last, ok := a.walkTo(path)
	if !ok {
		last = a.find(path) // path exists: the callers looked it up
		segs, chain = a.t.segs, a.t.chain
	}
	nn := fn(last)
	prev := last
	for i := len(chain) - 1; i >= 0; i-- {
		c := a.own(chain[i])
		if nn != prev { // else the child was changed in place and c already points at it
			c.kids, _ = c.kids.setIn(a.tr, nn)
		}
		prev, nn = chain[i], c
	}
	a.v.root = nn
	clear(chain)
	clear(a.t.chain) // a walk's chain may run one node past what this rewrite used
	a.t.segs, a.t.chain = segs, chain[:0]
}

// asCode turns an error from the appliers into its ZooKeeper code.
func asCode(err error) jute.Code {
	var c jute.Code
	if errors.As(err, &c) {
		return c
	}
	return jute.CodeSystemError
}
