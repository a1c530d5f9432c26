package jute

import (
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var sampleStat = Stat{
	Czxid: 0x0102030405060708, Mzxid: 2, Ctime: 1795268052188, Mtime: 1795268052229, Version: 5,
	Cversion: -2, Aversion: 7, EphemeralOwner: 0x0100000325d60000, DataLength: 9, NumChildren: 10, Pzxid: 11,
}

var sampleACL = []ACL{
	{Perms: PermRead | PermAdmin, ID: Id{Scheme: "digest", ID: "alice:HcQ9v0kXcUUNykTwCrFi9iS/fAs="}},
	{Perms: PermAll, ID: Id{Scheme: "world", ID: "anyone"}},
}

// allOpsMulti holds one op of every kind a multi or multiRead request may carry.
var allOpsMulti = &MultiRequest{Ops: []MultiOp{
	{Type: OpCreate, Req: &CreateRequest{Path: "/a", Data: []byte("x"), ACL: sampleACL, Flags: ModeEphemeralSequential}},
	{Type: OpCreate2, Req: &CreateRequest{Path: "/b", Data: nil, ACL: []ACL{}, Flags: ModePersistent}},
	{Type: OpCreateContainer, Req: &CreateRequest{Path: "/c", Data: []byte{}, ACL: sampleACL, Flags: ModeContainer}},
	{Type: OpCreateTTL, Req: &CreateTTLRequest{Path: "/d", Data: []byte("t"), ACL: sampleACL, Flags: ModePersistentSequentialWithTTL, TTL: 1 << 39}},
	{Type: OpDelete, Req: &DeleteRequest{Path: "/e", Version: -1}},
	{Type: OpSetData, Req: &SetDataRequest{Path: "/f", Data: nil, Version: 3}},
	{Type: OpCheck, Req: &CheckVersionRequest{Path: "/g", Version: 4}},
	{Type: OpGetChildren, Req: &GetChildrenRequest{Path: "/h", Watch: true}},
	{Type: OpGetData, Req: &GetDataRequest{Path: "/i"}},
}}

// allResultsMulti holds one result of every kind a multi or multiRead response may carry,
// including failed ops.
var allResultsMulti = &MultiResponse{Results: []MultiResult{
	{Type: OpCreate, Resp: &CreateResponse{Path: "/a0000000001"}},
	{Type: OpCreate2, Resp: &Create2Response{Path: "/b", Stat: sampleStat}},
	{Type: OpCreateContainer, Resp: &Create2Response{Path: "/c", Stat: sampleStat}},
	{Type: OpCreateTTL, Resp: &Create2Response{Path: "/d0000000002", Stat: sampleStat}},
	{Type: OpDelete},
	{Type: OpSetData, Resp: &SetDataResponse{Stat: sampleStat}},
	{Type: OpCheck},
	{Type: OpGetChildren, Resp: &GetChildrenResponse{Children: []string{}}},
	{Type: OpGetData, Resp: &GetDataResponse{Data: nil, Stat: sampleStat}},
	{Type: OpError, Err: CodeOK, Resp: &ErrorResponse{Err: CodeOK}},
	{Type: OpError, Err: CodeBadVersion, Resp: &ErrorResponse{Err: CodeBadVersion}},
	{Type: OpError, Err: CodeRuntimeInconsistency, Resp: &ErrorResponse{Err: CodeRuntimeInconsistency}},
}}

// roundTripCase is one record value; op, when set, also routes it through DecodeRequest or
// DecodeReply.
type roundTripCase struct {
	name  string
	rec   Record
	reqOp Op // request body for this op (0 = not a request body)
	repOp Op // reply body for this op (0 = not a reply body)
}

func roundTripCases() []roundTripCase {
	return []roundTripCase{
		{name: "RequestHeader", rec: &RequestHeader{Xid: -8, Type: OpSetWatches2}},
		{name: "ReplyHeader", rec: &ReplyHeader{Xid: 7, Zxid: 1 << 40, Err: CodeNoNode}},
		{name: "Id", rec: &Id{Scheme: "ip", ID: "10.0.0.0/8"}},
		{name: "ACL", rec: &ACL{Perms: PermCreate | PermDelete, ID: Id{Scheme: "auth", ID: ""}}},
		{name: "Stat", rec: &sampleStat},
		{name: "WatcherEvent", rec: &WatcherEvent{Type: EventNodeChildrenChanged, State: StateSyncConnected, Path: "/p"}},
		{name: "ClientInfo", rec: &ClientInfo{AuthScheme: "digest", User: "alice"}},
		{name: "ErrorResponse", rec: &ErrorResponse{Err: CodeOK}, repOp: OpAddWatch},
		{name: "CreateRequest", rec: &CreateRequest{Path: "/n", Data: []byte("d"), ACL: sampleACL, Flags: ModeEphemeral}, reqOp: OpCreate},
		{name: "CreateRequest/null data and ACL", rec: &CreateRequest{Path: "/n", Flags: ModePersistent}, reqOp: OpCreate2},
		{name: "CreateRequest/empty data and ACL", rec: &CreateRequest{Path: "/n", Data: []byte{}, ACL: []ACL{}, Flags: ModeContainer}, reqOp: OpCreateContainer},
		{name: "CreateTTLRequest", rec: &CreateTTLRequest{Path: "/t", Data: []byte("ttl"), ACL: sampleACL, Flags: ModePersistentWithTTL, TTL: 0xFFFFFFFFFF}, reqOp: OpCreateTTL},
		{name: "CreateResponse", rec: &CreateResponse{Path: "/n0000000003"}, repOp: OpCreate},
		{name: "Create2Response", rec: &Create2Response{Path: "/n", Stat: sampleStat}, repOp: OpCreate2},
		{name: "Create2Response/container", rec: &Create2Response{Path: "/c", Stat: sampleStat}, repOp: OpCreateContainer},
		{name: "Create2Response/ttl", rec: &Create2Response{Path: "/t", Stat: sampleStat}, repOp: OpCreateTTL},
		{name: "DeleteRequest", rec: &DeleteRequest{Path: "/n", Version: -1}, reqOp: OpDelete},
		{name: "DeleteContainerRequest", rec: &DeleteContainerRequest{Path: "/c"}, reqOp: OpDeleteContainer},
		{name: "ExistsRequest", rec: &ExistsRequest{Path: "/n", Watch: true}, reqOp: OpExists},
		{name: "ExistsResponse", rec: &ExistsResponse{Stat: sampleStat}, repOp: OpExists},
		{name: "GetDataRequest", rec: &GetDataRequest{Path: "/n", Watch: true}, reqOp: OpGetData},
		{name: "GetDataResponse", rec: &GetDataResponse{Data: []byte{0, 1, 2, 0xff}, Stat: sampleStat}, repOp: OpGetData},
		{name: "GetDataResponse/null", rec: &GetDataResponse{Data: nil, Stat: sampleStat}, repOp: OpGetData},
		{name: "GetDataResponse/empty", rec: &GetDataResponse{Data: []byte{}, Stat: sampleStat}, repOp: OpGetData},
		{name: "GetDataResponse/reconfig", rec: &GetDataResponse{Data: []byte("server.1=127.0.0.1:2888:3888\nversion=100000000"), Stat: sampleStat}, repOp: OpReconfig},
		{name: "SetDataRequest", rec: &SetDataRequest{Path: "/n", Data: []byte("v"), Version: 2}, reqOp: OpSetData},
		{name: "SetDataRequest/null", rec: &SetDataRequest{Path: "/n", Data: nil, Version: -1}, reqOp: OpSetData},
		{name: "SetDataResponse", rec: &SetDataResponse{Stat: sampleStat}, repOp: OpSetData},
		{name: "GetACLRequest", rec: &GetACLRequest{Path: "/n"}, reqOp: OpGetACL},
		{name: "GetACLResponse", rec: &GetACLResponse{ACL: sampleACL, Stat: sampleStat}, repOp: OpGetACL},
		{name: "SetACLRequest", rec: &SetACLRequest{Path: "/n", ACL: sampleACL, Version: 1}, reqOp: OpSetACL},
		{name: "SetACLResponse", rec: &SetACLResponse{Stat: sampleStat}, repOp: OpSetACL},
		{name: "GetChildrenRequest", rec: &GetChildrenRequest{Path: "/", Watch: true}, reqOp: OpGetChildren},
		{name: "GetChildrenResponse", rec: &GetChildrenResponse{Children: []string{"a", "", "ünï"}}, repOp: OpGetChildren},
		{name: "GetChildrenResponse/null", rec: &GetChildrenResponse{}, repOp: OpGetChildren},
		{name: "GetChildrenResponse/empty", rec: &GetChildrenResponse{Children: []string{}}, repOp: OpGetChildren},
		{name: "GetChildren2Request", rec: &GetChildren2Request{Path: "/n"}, reqOp: OpGetChildren2},
		{name: "GetChildren2Response", rec: &GetChildren2Response{Children: []string{"x"}, Stat: sampleStat}, repOp: OpGetChildren2},
		{name: "SyncRequest", rec: &SyncRequest{Path: "/n"}, reqOp: OpSync},
		{name: "SyncResponse", rec: &SyncResponse{Path: "/n"}, repOp: OpSync},
		{name: "CheckVersionRequest", rec: &CheckVersionRequest{Path: "/n", Version: 9}, reqOp: OpCheck},
		{name: "MultiHeader", rec: &MultiHeader{Type: OpError, Done: false, Err: CodeNotEmpty}},
		{name: "MultiHeader/done", rec: &MultiHeader{Type: -1, Done: true, Err: -1}},
		{name: "ReconfigRequest", rec: &ReconfigRequest{JoiningServers: "server.4=h:1:2;3", LeavingServers: "2", NewMembers: "", CurConfigID: -1}, reqOp: OpReconfig},
		{name: "CheckWatchesRequest", rec: &CheckWatchesRequest{Path: "/n", Type: WatcherPersistentRecursive}, reqOp: OpCheckWatches},
		{name: "RemoveWatchesRequest", rec: &RemoveWatchesRequest{Path: "/n", Type: WatcherAny}, reqOp: OpRemoveWatches},
		{name: "AddWatchRequest", rec: &AddWatchRequest{Path: "/n", Mode: AddWatchPersistent}, reqOp: OpAddWatch},
		{name: "SetWatches", rec: &SetWatches{RelativeZxid: 5, DataWatches: []string{"/a"}, ExistWatches: nil, ChildWatches: []string{}}, reqOp: OpSetWatches},
		{name: "SetWatches2", rec: &SetWatches2{RelativeZxid: 6, DataWatches: []string{"/a", "/b"}, ExistWatches: []string{}, ChildWatches: nil, PersistentWatches: []string{"/p"}, PersistentRecursiveWatches: []string{"/r"}}, reqOp: OpSetWatches2},
		{name: "GetEphemeralsRequest", rec: &GetEphemeralsRequest{PrefixPath: "/"}, reqOp: OpGetEphemerals},
		{name: "GetEphemeralsResponse", rec: &GetEphemeralsResponse{Ephemerals: []string{"/e", "/es-0000000003"}}, repOp: OpGetEphemerals},
		{name: "GetAllChildrenNumberRequest", rec: &GetAllChildrenNumberRequest{Path: "/"}, reqOp: OpGetAllChildrenNumber},
		{name: "GetAllChildrenNumberResponse", rec: &GetAllChildrenNumberResponse{TotalNumber: 3}, repOp: OpGetAllChildrenNumber},
		{name: "WhoAmIResponse", rec: &WhoAmIResponse{ClientInfo: []ClientInfo{{AuthScheme: "digest", User: "alice"}, {AuthScheme: "ip", User: "127.0.0.1"}}}, repOp: OpWhoAmI},
		{name: "WhoAmIResponse/null", rec: &WhoAmIResponse{}, repOp: OpWhoAmI},
		{name: "AuthPacket", rec: &AuthPacket{Type: 0, Scheme: "digest", Auth: []byte("alice:secret")}, reqOp: OpAuth},
		{name: "GetSASLRequest", rec: &GetSASLRequest{Token: []byte{1, 2, 3}}, reqOp: OpSASL},
		{name: "SetSASLResponse", rec: &SetSASLResponse{Token: nil}, repOp: OpSASL},
		{name: "ConnectRequest", rec: &ConnectRequest{ProtocolVersion: 0, LastZxidSeen: 42, TimeOut: 30000, SessionID: 0x0100000325d60000, Passwd: make([]byte, 16), ReadOnly: true, HasReadOnly: true}},
		{name: "ConnectRequest/no readOnly", rec: &ConnectRequest{TimeOut: 4000, Passwd: make([]byte, 16)}},
		{name: "ConnectRequest/null passwd", rec: &ConnectRequest{TimeOut: 4000, HasReadOnly: true}},
		{name: "ConnectResponse", rec: &ConnectResponse{TimeOut: 4000, SessionID: 1, Passwd: []byte("0123456789abcdef"), ReadOnly: false, HasReadOnly: true}},
		{name: "ConnectResponse/no readOnly", rec: &ConnectResponse{TimeOut: 4000, SessionID: 1, Passwd: []byte("0123456789abcdef")}},
		{name: "MultiRequest", rec: allOpsMulti, reqOp: OpMulti},
		{name: "MultiRequest/multiRead", rec: &MultiRequest{Ops: allOpsMulti.Ops[7:]}, reqOp: OpMultiRead},
		{name: "MultiRequest/empty", rec: &MultiRequest{}, reqOp: OpMulti},
		{name: "MultiResponse", rec: allResultsMulti, repOp: OpMulti},
		{name: "MultiResponse/multiRead", rec: &MultiResponse{Results: allResultsMulti.Results[7:]}, repOp: OpMultiRead},
		{name: "MultiResponse/empty", rec: &MultiResponse{}, repOp: OpMulti},
	}
}

// newLike returns a new zero record of the same type as r.
func newLike(r Record) Record {
	return reflect.New(reflect.TypeOf(r).Elem()).Interface().(Record)
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range roundTripCases() {
		t.Run(tc.name, func(t *testing.T) {
			enc := Marshal(nil, tc.rec)
			got := newLike(tc.rec)
			if err := Unmarshal(enc, 0, got); err != nil {
				t.Fatalf("Unmarshal(%x) = %v", enc, err)
			}
			if !reflect.DeepEqual(got, tc.rec) {
				t.Fatalf("decoded %+v; want %+v", got, tc.rec)
			}
			if again := Marshal(nil, got); !bytes.Equal(again, enc) {
				t.Fatalf("re-encoded %x; want %x", again, enc)
			}
			// Every proper prefix must fail cleanly (a ConnectRequest or ConnectResponse cut just
			// before its optional readOnly byte is itself valid).
			for n := range len(enc) {
				p := newLike(tc.rec)
				err := Unmarshal(enc[:n], 0, p)
				if err == nil {
					if c, ok := tc.rec.(interface{ hasReadOnly() bool }); ok && c.hasReadOnly() && n == len(enc)-1 {
						continue
					}
					t.Fatalf("Unmarshal of %d of %d bytes succeeded: %+v", n, len(enc), p)
				}
				if !errors.Is(err, ErrShortBuffer) {
					t.Fatalf("Unmarshal of %d of %d bytes = %v; want ErrShortBuffer", n, len(enc), err)
				}
			}
			// A byte too many is trailing data.
			if err := Unmarshal(append(slices.Clone(enc), 0), 0, newLike(tc.rec)); !errors.Is(err, ErrTrailingData) {
				if _, conn := tc.rec.(interface{ hasReadOnly() bool }); !conn {
					t.Fatalf("Unmarshal with a trailing byte = %v; want ErrTrailingData", err)
				}
			}
			if tc.reqOp != 0 {
				checkRequestRoute(t, tc)
			}
			if tc.repOp != 0 {
				checkReplyRoute(t, tc)
			}
		})
	}
}

func (r *ConnectRequest) hasReadOnly() bool  { return r.HasReadOnly }
func (r *ConnectResponse) hasReadOnly() bool { return r.HasReadOnly }

func checkRequestRoute(t *testing.T, tc roundTripCase) {
	t.Helper()
	frame := AppendRequest(nil, RequestHeader{Xid: 3, Type: tc.reqOp}, tc.rec)
	payload, err := ReadFrame(bytes.NewReader(frame), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	h, body, err := DecodeRequest(payload, 0)
	if err != nil || h != (RequestHeader{Xid: 3, Type: tc.reqOp}) || !reflect.DeepEqual(body, tc.rec) {
		t.Fatalf("DecodeRequest = %+v, %+v, %v; want %+v", h, body, err, tc.rec)
	}
}

func checkReplyRoute(t *testing.T, tc roundTripCase) {
	t.Helper()
	want := ReplyHeader{Xid: 3, Zxid: 99}
	frame := AppendReply(nil, want, tc.rec)
	h, body, err := DecodeReply(frame[FrameHeaderLen:], tc.repOp, 0)
	if err != nil || h != want || !reflect.DeepEqual(body, tc.rec) {
		t.Fatalf("DecodeReply = %+v, %+v, %v; want %+v", h, body, err, tc.rec)
	}
}

// TestRoundTripCoversEveryRecord parses the package's source and fails if a type with an Encode
// method has no round-trip case, so a new record cannot be added without one.
func TestRoundTripCoversEveryRecord(t *testing.T) {
	covered := map[string]bool{}
	for _, tc := range roundTripCases() {
		covered[reflect.TypeOf(tc.rec).Elem().Name()] = true
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var records []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "Encode" {
				continue
			}
			star, ok := fn.Recv.List[0].Type.(*ast.StarExpr)
			if !ok {
				continue
			}
			records = append(records, star.X.(*ast.Ident).Name)
		}
	}
	if len(records) < 45 {
		t.Fatalf("found only %d records in the source: %v", len(records), records)
	}
	for _, r := range records {
		if !covered[r] {
			t.Errorf("record %s has no round-trip case", r)
		}
	}
}

// TestNewRequestResponseTypes checks the factories against the op table of the protocol.
func TestNewRequestResponseTypes(t *testing.T) {
	for op := Op(-20); op <= 200; op++ {
		req, resp := NewRequest(op), NewResponse(op)
		if !op.Known() && (req != nil || resp != nil) {
			t.Errorf("unknown op %v has records %T, %T", op, req, resp)
		}
		if req != nil && !RequestHasBody(op) {
			t.Errorf("op %v: NewRequest = %T but RequestHasBody is false", op, req)
		}
		switch op {
		case OpPing, OpCloseSession, OpWhoAmI:
			if !ValidRequest(op) || req != nil {
				t.Errorf("op %v: want a valid header-only request", op)
			}
		case OpNotification, OpCreateSession, OpError:
			if ValidRequest(op) {
				t.Errorf("op %v must not be a valid client request", op)
			}
		default:
			if op.Known() && !ValidRequest(op) {
				t.Errorf("op %v has no request record", op)
			}
		}
	}
	// Replies without a body (§20.5 of the protocol notes).
	for _, op := range []Op{OpDelete, OpSetWatches, OpSetWatches2, OpCheckWatches, OpRemoveWatches, OpCloseSession, OpAuth, OpPing, OpDeleteContainer} {
		if r := NewResponse(op); r != nil {
			t.Errorf("NewResponse(%v) = %T; want no body", op, r)
		}
	}
	if _, ok := NewResponse(OpAddWatch).(*ErrorResponse); !ok {
		t.Error("addWatch replies must carry a 4-byte ErrorResponse")
	}
	if _, ok := NewResponse(OpCreate).(*CreateResponse); !ok {
		t.Error("create (1) replies with the path only")
	}
	for _, op := range []Op{OpCreate2, OpCreateContainer, OpCreateTTL} {
		if _, ok := NewResponse(op).(*Create2Response); !ok {
			t.Errorf("%v replies with path and stat", op)
		}
	}
}
