package jute

import (
	"bytes"
	"encoding/binary"
	"regexp"
	"slices"
	"testing"
)

// Field checks for each captured exchange. Zxids, times and session ids change from one capture to
// the next, so they are checked for consistency (echoed xids, positive zxids, owners matching the
// session) rather than for fixed values.

// frames asserts the directions and kinds of an exchange.
func frames(t *testing.T, f []decodedFrame, want ...string) {
	t.Helper()
	var got []string
	for _, d := range f {
		got = append(got, string(d.dir)+" "+d.kind)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("frames = %q; want %q", got, want)
	}
}

// bodyAs returns frame i's body as a T, failing the test if it is something else.
func bodyAs[T Record](t *testing.T, f []decodedFrame, i int) T {
	t.Helper()
	b, ok := f[i].body.(T)
	if !ok {
		var zero T
		t.Fatalf("frame %d body = %T; want %T", i, f[i].body, zero)
	}
	return b
}

// okReply checks that reply i answers request i-1 with no error and returns its body.
func okReply[T Record](t *testing.T, f []decodedFrame, i int) T {
	t.Helper()
	if f[i].rep.Err != CodeOK || f[i].rep.Xid != f[i-1].req.Xid || f[i].rep.Zxid <= 0 {
		t.Fatalf("reply header = %+v; want err 0, xid %d, zxid > 0", f[i].rep, f[i-1].req.Xid)
	}
	return bodyAs[T](t, f, i)
}

// errReply checks a header-only error reply to request i-1.
func errReply(t *testing.T, f []decodedFrame, i int, code Code) {
	t.Helper()
	r := f[i]
	if r.rep.Err != code || r.rep.Xid != f[i-1].req.Xid || r.body != nil || len(r.frame) != 4+16 {
		t.Fatalf("reply = %+v, body %T, %d bytes; want header-only %v for xid %d", r.rep, r.body, len(r.frame)-4, code, f[i-1].req.Xid)
	}
}

// noBodyReply checks a successful header-only reply to request i-1.
func noBodyReply(t *testing.T, f []decodedFrame, i int) {
	t.Helper()
	errReply(t, f, i, CodeOK)
}

// rawBufferLen reads the length prefix of the first buffer after skip bytes of a frame payload.
func rawBufferLen(f decodedFrame, skip int) int32 {
	return int32(binary.BigEndian.Uint32(f.frame[4+skip:]))
}

func checkStat(t *testing.T, s Stat, dataLen, numChildren int32) {
	t.Helper()
	if s.Czxid <= 0 || s.Mzxid < s.Czxid || s.Pzxid < s.Czxid || s.Ctime <= 0 || s.Mtime < s.Ctime ||
		s.DataLength != dataLen || s.NumChildren != numChildren {
		t.Errorf("stat = %+v; want dataLength %d, numChildren %d and consistent zxids", s, dataLen, numChildren)
	}
}

func checkConnect(readOnly bool, reqLen, respLen int) func(t *testing.T, f []decodedFrame) {
	return func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> connect", "< connect")
		req, resp := f[0].connReq, f[1].connRep
		if req.HasReadOnly != readOnly || resp.HasReadOnly != readOnly {
			t.Errorf("readOnly byte present: request %v, response %v; want %v", req.HasReadOnly, resp.HasReadOnly, readOnly)
		}
		if len(f[0].frame)-4 != reqLen || len(f[1].frame)-4 != respLen {
			t.Errorf("payload sizes %d, %d; want %d, %d", len(f[0].frame)-4, len(f[1].frame)-4, reqLen, respLen)
		}
		if resp.SessionID == 0 || len(resp.Passwd) != 16 || resp.ProtocolVersion != 0 {
			t.Errorf("response = %+v; want a session and a 16-byte password", resp)
		}
	}
}

var seqName = regexp.MustCompile(`^/jute/seq-\d{10}$`)

var goldenChecks = map[string]func(t *testing.T, f []decodedFrame){
	"connect_readonly":    checkConnect(true, 45, 37),
	"connect_no_readonly": checkConnect(false, 44, 36),
	"connect_unknown_session": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> connect", "< connect")
		resp := f[1].connRep
		if f[0].connReq.SessionID == 0 || resp.TimeOut != 0 || resp.SessionID != 0 || !bytes.Equal(resp.Passwd, make([]byte, 16)) || !resp.HasReadOnly {
			t.Errorf("response = %+v; want timeOut 0, session 0, 16 zero bytes, readOnly byte", resp)
		}
	},
	"close_session": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> closeSession", "< closeSession")
		noBodyReply(t, f, 1)
	},
	"ping": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> ping", "< ping")
		if f[0].req != (RequestHeader{Xid: XidPing, Type: OpPing}) || len(f[0].frame) != 12 {
			t.Errorf("ping request = %+v", f[0].req)
		}
		noBodyReply(t, f, 1)
	},
	"create": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> create", "< create")
		req := bodyAs[*CreateRequest](t, f, 0)
		if req.Path != "/jute" || string(req.Data) != "jute" || req.Flags != ModePersistent || !slices.Equal(req.ACL, worldAll) {
			t.Errorf("request = %+v", req)
		}
		if resp := okReply[*CreateResponse](t, f, 1); resp.Path != "/jute" {
			t.Errorf("path = %q", resp.Path)
		}
	},
	"create_node_exists": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> create", "< create")
		errReply(t, f, 1, CodeNodeExists)
	},
	"create_bad_path": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> create", "< create")
		errReply(t, f, 1, CodeBadArguments)
	},
	"create2_ephemeral": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> create2", "< create2")
		if req := bodyAs[*CreateRequest](t, f, 0); req.Flags != ModeEphemeral {
			t.Errorf("flags = %v", req.Flags)
		}
		resp := okReply[*Create2Response](t, f, 1)
		checkStat(t, resp.Stat, 5, 0)
		if resp.Path != "/jute/eph" || resp.Stat.EphemeralOwner == 0 || resp.Stat.Czxid != f[1].rep.Zxid {
			t.Errorf("response = %+v (reply zxid %d); want an owner and czxid = reply zxid", resp, f[1].rep.Zxid)
		}
	},
	"create_sequential": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> create", "< create")
		if resp := okReply[*CreateResponse](t, f, 1); !seqName.MatchString(resp.Path) {
			t.Errorf("path = %q; want /jute/seq- and 10 digits", resp.Path)
		}
	},
	"create_null_data": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> create", "< create")
		req := bodyAs[*CreateRequest](t, f, 0)
		if req.Data != nil || rawBufferLen(f[0], 8+4+len(req.Path)) != -1 {
			t.Errorf("data = %#v; want null (length -1)", req.Data)
		}
		okReply[*CreateResponse](t, f, 1)
	},
	"getdata_null": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> getData", "< getData")
		resp := okReply[*GetDataResponse](t, f, 1)
		if resp.Data != nil || rawBufferLen(f[1], 16) != -1 {
			t.Errorf("data = %#v; want null kept as null", resp.Data)
		}
		checkStat(t, resp.Stat, 0, 0)
	},
	"create_empty_data": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> create2", "< create2")
		if req := bodyAs[*CreateRequest](t, f, 0); req.Data == nil || len(req.Data) != 0 {
			t.Errorf("data = %#v; want empty, not null", req.Data)
		}
		checkStat(t, okReply[*Create2Response](t, f, 1).Stat, 0, 0)
	},
	"getdata_empty": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> getData", "< getData")
		resp := okReply[*GetDataResponse](t, f, 1)
		if resp.Data == nil || len(resp.Data) != 0 || rawBufferLen(f[1], 16) != 0 {
			t.Errorf("data = %#v; want empty, not null", resp.Data)
		}
	},
	"create_container": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> createContainer", "< createContainer")
		resp := okReply[*Create2Response](t, f, 1)
		checkStat(t, resp.Stat, 3, 0)
		if resp.Path != "/jute/container" || resp.Stat.EphemeralOwner != 0 {
			t.Errorf("response = %+v; want owner reported as 0", resp)
		}
	},
	"create_ttl": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> createTTL", "< createTTL")
		if req := bodyAs[*CreateTTLRequest](t, f, 0); req.TTL != 3600000 || req.Flags != ModePersistentWithTTL {
			t.Errorf("request = %+v", req)
		}
		resp := okReply[*Create2Response](t, f, 1)
		if resp.Path != "/jute/ttl" || resp.Stat.EphemeralOwner != 0 {
			t.Errorf("response = %+v; want owner reported as 0", resp)
		}
	},
	"getdata": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> getData", "< getData")
		resp := okReply[*GetDataResponse](t, f, 1)
		if string(resp.Data) != "jute" || resp.Stat.Version != 0 {
			t.Errorf("response = %+v", resp)
		}
		checkStat(t, resp.Stat, 4, resp.Stat.NumChildren)
	},
	"getdata_missing": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> getData", "< getData")
		if !bodyAs[*GetDataRequest](t, f, 0).Watch {
			t.Error("watch flag lost")
		}
		errReply(t, f, 1, CodeNoNode)
	},
	"setdata": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> setData", "< setData")
		resp := okReply[*SetDataResponse](t, f, 1)
		if resp.Stat.Version != 1 || resp.Stat.Mzxid != f[1].rep.Zxid || resp.Stat.DataLength != 5 {
			t.Errorf("stat = %+v; want version 1, mzxid = reply zxid %d", resp.Stat, f[1].rep.Zxid)
		}
	},
	"setdata_bad_version": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> setData", "< setData")
		errReply(t, f, 1, CodeBadVersion)
	},
	"exists": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> exists", "< exists")
		resp := okReply[*ExistsResponse](t, f, 1)
		checkStat(t, resp.Stat, 5, resp.Stat.NumChildren)
		if len(f[1].frame)-4 != 16+68 {
			t.Errorf("exists reply is %d bytes; want header and a 68-byte stat", len(f[1].frame)-4)
		}
	},
	"exists_missing": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> exists", "< exists")
		errReply(t, f, 1, CodeNoNode)
	},
	"checkwatches": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> checkWatches", "< checkWatches")
		if req := bodyAs[*CheckWatchesRequest](t, f, 0); req.Type != WatcherData {
			t.Errorf("type = %v", req.Type)
		}
		noBodyReply(t, f, 1)
	},
	"removewatches": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> removeWatches", "< removeWatches")
		if req := bodyAs[*RemoveWatchesRequest](t, f, 0); req.Type != WatcherAny {
			t.Errorf("type = %v", req.Type)
		}
		noBodyReply(t, f, 1)
	},
	"checkwatches_none": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> checkWatches", "< checkWatches")
		errReply(t, f, 1, CodeNoWatcher)
	},
	"setacl": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> setACL", "< setACL")
		if req := bodyAs[*SetACLRequest](t, f, 0); len(req.ACL) != 2 {
			t.Errorf("acl = %+v", req.ACL)
		}
		if s := okReply[*SetACLResponse](t, f, 1).Stat; s.Aversion != 1 || s.Version != 0 {
			t.Errorf("stat = %+v; want aversion 1", s)
		}
	},
	"getacl": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> getACL", "< getACL")
		resp := okReply[*GetACLResponse](t, f, 1)
		want := []ACL{{Perms: PermRead, ID: Id{Scheme: "world", ID: "anyone"}}, {Perms: PermAll, ID: Id{Scheme: "ip", ID: "127.0.0.1"}}}
		if !slices.Equal(resp.ACL, want) || resp.Stat.Aversion != 1 {
			t.Errorf("response = %+v; want %+v, aversion 1", resp, want)
		}
	},
	"getchildren": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> getChildren", "< getChildren")
		got := slices.Sorted(slices.Values(okReply[*GetChildrenResponse](t, f, 1).Children))
		if !slices.Contains(got, "eph") || !slices.Contains(got, "null") || !slices.Contains(got, "acl") {
			t.Errorf("children = %q", got)
		}
	},
	"getchildren2": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> getChildren2", "< getChildren2")
		resp := okReply[*GetChildren2Response](t, f, 1)
		if int(resp.Stat.NumChildren) != len(resp.Children) || resp.Stat.Czxid <= 0 {
			t.Errorf("response = %+v; want the parent's stat counting the children", resp)
		}
	},
	"sync": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> sync", "< sync")
		if resp := okReply[*SyncResponse](t, f, 1); resp.Path != "/jute" {
			t.Errorf("path = %q", resp.Path)
		}
	},
	"delete": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> delete", "< delete")
		if req := bodyAs[*DeleteRequest](t, f, 0); req.Version != -1 || req.Path != "/jute/gone" {
			t.Errorf("request = %+v", req)
		}
		noBodyReply(t, f, 1)
	},
	"delete_not_empty": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> delete", "< delete")
		errReply(t, f, 1, CodeNotEmpty)
	},
	"multi": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> multi", "< multi")
		req := bodyAs[*MultiRequest](t, f, 0)
		var ops []Op
		for _, o := range req.Ops {
			ops = append(ops, o.Type)
		}
		if !slices.Equal(ops, []Op{OpCreate, OpCreate2, OpSetData, OpCheck, OpDelete}) {
			t.Errorf("ops = %v", ops)
		}
		resp := okReply[*MultiResponse](t, f, 1)
		var types []Op
		for _, r := range resp.Results {
			types = append(types, r.Type)
			if r.Err != CodeOK {
				t.Errorf("result %+v has an error", r)
			}
		}
		// 3.8.0 answers a create2 inside multi with result type 1 (3.8.2+ and 3.9 use 15).
		if !slices.Equal(types, []Op{OpCreate, OpCreate, OpSetData, OpCheck, OpDelete}) {
			t.Errorf("result types = %v", types)
		}
		if p := resp.Results[1].Resp.(*CreateResponse).Path; p != "/jute/m/c" {
			t.Errorf("second create path = %q", p)
		}
		if s := resp.Results[2].Resp.(*SetDataResponse).Stat; s.Version != 1 || s.Mzxid != f[1].rep.Zxid {
			t.Errorf("setData stat = %+v; want version 1 at the multi's zxid %d", s, f[1].rep.Zxid)
		}
	},
	"multi_failure": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> multi", "< multi")
		resp := okReply[*MultiResponse](t, f, 1)
		want := []Code{CodeOK, CodeBadVersion, CodeRuntimeInconsistency}
		if len(resp.Results) != len(want) {
			t.Fatalf("results = %+v", resp.Results)
		}
		for i, r := range resp.Results {
			er, ok := r.Resp.(*ErrorResponse)
			if r.Type != OpError || r.Err != want[i] || !ok || er.Err != want[i] {
				t.Errorf("result %d = %+v (%+v); want type -1 with code %v twice", i, r, r.Resp, want[i])
			}
		}
	},
	"multiread": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> multiRead", "< multiRead")
		resp := okReply[*MultiResponse](t, f, 1)
		if len(resp.Results) != 3 {
			t.Fatalf("results = %+v", resp.Results)
		}
		if r := resp.Results[0]; r.Type != OpGetChildren || r.Resp.(*GetChildrenResponse).Children == nil {
			t.Errorf("result 0 = %+v; want getChildren with an empty, non-null list", r)
		}
		if r := resp.Results[1]; r.Type != OpGetData || string(r.Resp.(*GetDataResponse).Data) != "jute2" {
			t.Errorf("result 1 = %+v", r)
		}
		if r := resp.Results[2]; r.Type != OpError || r.Err != CodeNoNode {
			t.Errorf("result 2 = %+v", r)
		}
	},
	"multiread_write": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> multiRead", "< multiRead")
		errReply(t, f, 1, CodeMarshallingError)
	},
	"addwatch": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> addWatch", "< addWatch")
		if req := bodyAs[*AddWatchRequest](t, f, 0); req.Mode != AddWatchPersistentRecursive {
			t.Errorf("mode = %v", req.Mode)
		}
		if resp := okReply[*ErrorResponse](t, f, 1); resp.Err != CodeOK || len(f[1].frame)-4 != 20 {
			t.Errorf("addWatch reply = %+v in %d bytes; want a 4-byte ErrorResponse(0) body", resp, len(f[1].frame)-4)
		}
	},
	"watch_notification": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> getData", "< getData", "> setData", "< notification", "< setData")
		ev := bodyAs[*WatcherEvent](t, f, 3)
		if *ev != (WatcherEvent{Type: EventNodeDataChanged, State: StateSyncConnected, Path: "/jute/w"}) {
			t.Errorf("event = %+v", ev)
		}
		if f[3].rep.Xid != XidNotification || f[3].rep.Err != CodeOK {
			t.Errorf("notification header = %+v", f[3].rep)
		}
		if f[4].rep.Xid != f[2].req.Xid {
			t.Errorf("setData reply xid %d; want %d", f[4].rep.Xid, f[2].req.Xid)
		}
	},
	"setwatches": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> setWatches", "< notification", "< notification", "< notification", "< setWatches")
		if f[0].req.Xid != XidSetWatches || f[4].rep.Xid != XidSetWatches {
			t.Errorf("xids %d and %d; want %d echoed", f[0].req.Xid, f[4].rep.Xid, XidSetWatches)
		}
		var got []WatcherEvent
		for _, d := range f[1:4] {
			got = append(got, *d.body.(*WatcherEvent))
			if d.rep.Zxid != -1 {
				t.Errorf("catch-up event zxid %d; want -1", d.rep.Zxid)
			}
		}
		want := []WatcherEvent{
			{Type: EventNodeDataChanged, State: StateSyncConnected, Path: "/jute"},
			{Type: EventNodeCreated, State: StateSyncConnected, Path: "/jute/w"},
			{Type: EventNodeDeleted, State: StateSyncConnected, Path: "/jute/gone"},
		}
		if !slices.Equal(got, want) {
			t.Errorf("events = %+v; want %+v", got, want)
		}
	},
	"setwatches2": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> setWatches2", "< setWatches2")
		req := bodyAs[*SetWatches2](t, f, 0)
		if req.DataWatches == nil || len(req.DataWatches) != 0 || !slices.Equal(req.PersistentRecursiveWatches, []string{"/jute/r"}) {
			t.Errorf("request = %+v", req)
		}
		noBodyReply(t, f, 1)
	},
	"getephemerals": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> getEphemerals", "< getEphemerals")
		if resp := okReply[*GetEphemeralsResponse](t, f, 1); !slices.Equal(resp.Ephemerals, []string{"/jute/eph"}) {
			t.Errorf("ephemerals = %q", resp.Ephemerals)
		}
	},
	"getallchildrennumber": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> getAllChildrenNumber", "< getAllChildrenNumber")
		if resp := okReply[*GetAllChildrenNumberResponse](t, f, 1); resp.TotalNumber < 8 {
			t.Errorf("total = %d; want every node under /jute", resp.TotalNumber)
		}
	},
	"auth": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> auth", "< auth")
		req := bodyAs[*AuthPacket](t, f, 0)
		if f[0].req.Xid != XidAuth || req.Scheme != "digest" || string(req.Auth) != "alice:secret" {
			t.Errorf("request = %+v %+v", f[0].req, req)
		}
		if r := f[1].rep; r != (ReplyHeader{Xid: XidAuth}) || f[1].body != nil {
			t.Errorf("reply = %+v; want xid -4, zxid 0, err 0, no body", r)
		}
	},
	"whoami": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> whoAmI", "< whoAmI")
		if f[0].body != nil || len(f[0].frame) != 12 {
			t.Errorf("whoAmI request has a body")
		}
		want := []ClientInfo{{AuthScheme: "digest", User: "alice"}, {AuthScheme: "ip", User: "127.0.0.1"}}
		if resp := okReply[*WhoAmIResponse](t, f, 1); !slices.Equal(resp.ClientInfo, want) {
			t.Errorf("client info = %+v; want %+v", resp.ClientInfo, want)
		}
	},
	"reconfig": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> reconfig", "< reconfig")
		if req := bodyAs[*ReconfigRequest](t, f, 0); req.CurConfigID != -1 || req.JoiningServers == "" {
			t.Errorf("request = %+v", req)
		}
		errReply(t, f, 1, CodeReconfigDisabled)
	},
	"unknown_op": func(t *testing.T, f []decodedFrame) {
		frames(t, f, "> op(99)", "< op(99)")
		if f[0].body != nil || f[0].req.Type.Known() {
			t.Errorf("request = %+v", f[0].req)
		}
		if r := f[1].rep; r.Err != CodeUnimplemented || r.Xid != 1 || f[1].body != nil {
			t.Errorf("reply = %+v; want Unimplemented, header-only", r)
		}
	},
}
