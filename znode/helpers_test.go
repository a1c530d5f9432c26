package znode

import (
	"errors"
	"testing"

	"github.com/zkd-io/zkd/jute"
)

var (
	worldAll  = []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "world", ID: "anyone"}}}
	worldRead = []jute.ACL{{Perms: jute.PermRead, ID: jute.Id{Scheme: "world", ID: "anyone"}}}
)

// harness applies transactions with increasing zxids and a clock the test controls.
type harness struct {
	t    *testing.T
	tree *Tree
	now  int64
	sess int64
	auth []jute.Id
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return &harness{t: t, tree: New(), now: 1000}
}

func (h *harness) apply(op jute.Op, req any) Result {
	h.t.Helper()
	zxid := h.tree.LastZxid() + 1
	res := h.tree.Apply(zxid, &Txn{Time: h.now, Session: h.sess, Auth: h.auth, Op: op, Req: req})
	if res.Zxid != zxid || h.tree.LastZxid() != zxid {
		h.t.Fatalf("Apply(%d) zxid = %d, LastZxid = %d", zxid, res.Zxid, h.tree.LastZxid())
	}
	return res
}

func (h *harness) create(path string, data []byte, mode jute.CreateMode) (string, error) {
	h.t.Helper()
	res := h.apply(jute.OpCreate, &jute.CreateRequest{Path: path, Data: data, ACL: worldAll, Flags: mode})
	if res.Err != nil {
		return "", res.Err
	}
	return res.Resp.(*jute.CreateResponse).Path, nil
}

func (h *harness) mustCreate(path string, mode jute.CreateMode) string {
	h.t.Helper()
	p, err := h.create(path, []byte("d"), mode)
	if err != nil {
		h.t.Fatalf("create(%q) = %v", path, err)
	}
	return p
}

func (h *harness) stat(path string) jute.Stat {
	h.t.Helper()
	st, ok := h.tree.View().Stat(path)
	if !ok {
		h.t.Fatalf("Stat(%q): no node", path)
	}
	return st
}

func (h *harness) exists(path string) bool {
	_, ok := h.tree.View().Stat(path)
	return ok
}

func (h *harness) openSession(id int64) {
	h.t.Helper()
	if res := h.apply(jute.OpCreateSession, &CreateSession{ID: id, Timeout: 4000, Passwd: []byte("0123456789abcdef")}); res.Err != nil {
		h.t.Fatalf("createSession = %v", res.Err)
	}
}

func wantCode(t *testing.T, what string, err error, want jute.Code) {
	t.Helper()
	if want == jute.CodeOK {
		if err != nil {
			t.Fatalf("%s = %v; want success", what, err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("%s = %v; want %v", what, err, want)
	}
}
