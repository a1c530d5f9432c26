package jute

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// The tables below are transcribed from the protocol notes (zookeeper-protocol.md §3, §4, §7 and
// §9.2, taken from ZooDefs.OpCode, KeeperException.Code, CreateMode and Watcher.Event), not from
// this package, so a wrong constant fails here.

var protocolOps = []struct {
	num  int32
	name string
	op   Op
}{
	{0, "notification", OpNotification}, {1, "create", OpCreate}, {2, "delete", OpDelete},
	{3, "exists", OpExists}, {4, "getData", OpGetData}, {5, "setData", OpSetData},
	{6, "getACL", OpGetACL}, {7, "setACL", OpSetACL}, {8, "getChildren", OpGetChildren},
	{9, "sync", OpSync}, {11, "ping", OpPing}, {12, "getChildren2", OpGetChildren2},
	{13, "check", OpCheck}, {14, "multi", OpMulti}, {15, "create2", OpCreate2},
	{16, "reconfig", OpReconfig}, {17, "checkWatches", OpCheckWatches}, {18, "removeWatches", OpRemoveWatches},
	{19, "createContainer", OpCreateContainer}, {20, "deleteContainer", OpDeleteContainer},
	{21, "createTTL", OpCreateTTL}, {22, "multiRead", OpMultiRead}, {100, "auth", OpAuth},
	{101, "setWatches", OpSetWatches}, {102, "sasl", OpSASL}, {103, "getEphemerals", OpGetEphemerals},
	{104, "getAllChildrenNumber", OpGetAllChildrenNumber}, {105, "setWatches2", OpSetWatches2},
	{106, "addWatch", OpAddWatch}, {107, "whoAmI", OpWhoAmI}, {-10, "createSession", OpCreateSession},
	{-11, "closeSession", OpCloseSession}, {-1, "error", OpError},
}

var protocolCodes = []struct {
	num  int32
	code Code
}{
	{0, CodeOK}, {-1, CodeSystemError}, {-2, CodeRuntimeInconsistency}, {-3, CodeDataInconsistency},
	{-4, CodeConnectionLoss}, {-5, CodeMarshallingError}, {-6, CodeUnimplemented}, {-7, CodeOperationTimeout},
	{-8, CodeBadArguments}, {-12, CodeUnknownSession}, {-13, CodeNewConfigNoQuorum}, {-14, CodeReconfigInProgress},
	{-100, CodeAPIError}, {-101, CodeNoNode}, {-102, CodeNoAuth}, {-103, CodeBadVersion},
	{-108, CodeNoChildrenForEphemerals}, {-110, CodeNodeExists}, {-111, CodeNotEmpty}, {-112, CodeSessionExpired},
	{-113, CodeInvalidCallback}, {-114, CodeInvalidACL}, {-115, CodeAuthFailed}, {-118, CodeSessionMoved},
	{-119, CodeNotReadOnly}, {-120, CodeEphemeralOnLocalSession}, {-121, CodeNoWatcher}, {-122, CodeRequestTimeout},
	{-123, CodeReconfigDisabled}, {-124, CodeSessionClosedRequireSASLAuth}, {-125, CodeQuotaExceeded},
	{-127, CodeThrottledOp},
}

func TestOpsMatchProtocol(t *testing.T) {
	seen := map[Op]bool{}
	for _, p := range protocolOps {
		if int32(p.op) != p.num {
			t.Errorf("%s = %d; want %d", p.name, int32(p.op), p.num)
		}
		if got := Op(p.num).String(); got != p.name {
			t.Errorf("Op(%d).String() = %q; want %q", p.num, got, p.name)
		}
		if !Op(p.num).Known() {
			t.Errorf("Op(%d).Known() = false", p.num)
		}
		seen[p.op] = true
	}
	for o := Op(-1000); o <= 1000; o++ {
		if o.Known() && !seen[o] {
			t.Errorf("op %d (%v) is not in the protocol table", o, o)
		}
	}
	for _, o := range []Op{10, 23, 99, 108, -2, -12} {
		if o.Known() || o.String() != fmt.Sprintf("op(%d)", o) {
			t.Errorf("Op(%d): Known %v, String %q; want unknown", o, o.Known(), o.String())
		}
	}
}

func TestOpIsWrite(t *testing.T) {
	writes := map[Op]bool{
		OpCreate: true, OpDelete: true, OpSetData: true, OpSetACL: true, OpCheck: true, OpMulti: true,
		OpCreate2: true, OpReconfig: true, OpCreateContainer: true, OpDeleteContainer: true,
		OpCreateTTL: true, OpCreateSession: true, OpCloseSession: true,
	}
	for _, p := range protocolOps {
		if p.op.IsWrite() != writes[p.op] {
			t.Errorf("%v.IsWrite() = %v; want %v", p.op, p.op.IsWrite(), writes[p.op])
		}
	}
}

func TestOpIsClientWrite(t *testing.T) {
	writes := map[Op]bool{
		OpCreate: true, OpDelete: true, OpSetData: true, OpSetACL: true, OpMulti: true,
		OpCreate2: true, OpCreateContainer: true, OpCreateTTL: true, OpCloseSession: true,
	}
	for _, p := range protocolOps {
		if p.op.IsClientWrite() != writes[p.op] {
			t.Errorf("%v.IsClientWrite() = %v; want %v", p.op, p.op.IsClientWrite(), writes[p.op])
		}
		if p.op.IsClientWrite() && !p.op.IsWrite() {
			t.Errorf("%v is a client write but not a write", p.op)
		}
	}
}

func TestCodesMatchProtocol(t *testing.T) {
	seen := map[Code]bool{}
	for _, p := range protocolCodes {
		if int32(p.code) != p.num {
			t.Errorf("code %v = %d; want %d", p.code, int32(p.code), p.num)
		}
		s := p.code.String()
		if !p.code.Known() || s == "" || strings.HasPrefix(s, "code(") || s != strings.ToLower(s) {
			t.Errorf("Code(%d).String() = %q; want a lower-case description", p.num, s)
		}
		if p.code.Error() != "zk: "+s {
			t.Errorf("Code(%d).Error() = %q", p.num, p.code.Error())
		}
		seen[p.code] = true
	}
	for c := Code(-1000); c <= 1000; c++ {
		if c.Known() && !seen[c] {
			t.Errorf("code %d (%v) is not in the protocol table: never invent codes", c, c)
		}
	}
	if Code(-126).Known() || Code(-126).String() != "code(-126)" {
		t.Error("there is no code -126")
	}
}

func TestCodeIsAnError(t *testing.T) {
	err := fmt.Errorf("server: getData /x: %w", CodeNoNode)
	if !errors.Is(err, CodeNoNode) || errors.Is(err, CodeNodeExists) {
		t.Errorf("errors.Is does not match codes: %v", err)
	}
	var c Code
	if !errors.As(err, &c) || c != CodeNoNode {
		t.Errorf("errors.As = %v", c)
	}
}

func TestEnumStrings(t *testing.T) {
	tests := []struct {
		got  fmt.Stringer
		num  int32
		want string
	}{
		{EventNone, -1, "None"}, {EventNodeCreated, 1, "NodeCreated"}, {EventNodeDeleted, 2, "NodeDeleted"},
		{EventNodeDataChanged, 3, "NodeDataChanged"}, {EventNodeChildrenChanged, 4, "NodeChildrenChanged"},
		{EventDataWatchRemoved, 5, "DataWatchRemoved"}, {EventChildWatchRemoved, 6, "ChildWatchRemoved"},
		{EventPersistentWatchRemoved, 7, "PersistentWatchRemoved"}, {EventType(9), 9, "event(9)"},

		{StateUnknown, -1, "Unknown"}, {StateDisconnected, 0, "Disconnected"}, {StateNoSyncConnected, 1, "NoSyncConnected"},
		{StateSyncConnected, 3, "SyncConnected"}, {StateAuthFailed, 4, "AuthFailed"},
		{StateConnectedReadOnly, 5, "ConnectedReadOnly"}, {StateSaslAuthenticated, 6, "SaslAuthenticated"},
		{StateExpired, -112, "Expired"}, {StateClosed, 7, "Closed"}, {State(2), 2, "state(2)"},

		{WatcherChildren, 1, "Children"}, {WatcherData, 2, "Data"}, {WatcherAny, 3, "Any"},
		{WatcherPersistent, 4, "Persistent"}, {WatcherPersistentRecursive, 5, "PersistentRecursive"},
		{WatcherType(0), 0, "watcher(0)"},

		{AddWatchPersistent, 0, "PERSISTENT"}, {AddWatchPersistentRecursive, 1, "PERSISTENT_RECURSIVE"},
		{AddWatchMode(2), 2, "mode(2)"},

		{ModePersistent, 0, "PERSISTENT"}, {ModeEphemeral, 1, "EPHEMERAL"},
		{ModePersistentSequential, 2, "PERSISTENT_SEQUENTIAL"}, {ModeEphemeralSequential, 3, "EPHEMERAL_SEQUENTIAL"},
		{ModeContainer, 4, "CONTAINER"}, {ModePersistentWithTTL, 5, "PERSISTENT_WITH_TTL"},
		{ModePersistentSequentialWithTTL, 6, "PERSISTENT_SEQUENTIAL_WITH_TTL"}, {CreateMode(7), 7, "mode(7)"},
	}
	for _, tc := range tests {
		if s := tc.got.String(); s != tc.want {
			t.Errorf("%T(%d).String() = %q; want %q", tc.got, tc.num, s, tc.want)
		}
		if n := fmt.Sprintf("%d", tc.got); n != fmt.Sprint(tc.num) {
			t.Errorf("%T %s = %s; want %d", tc.got, tc.want, n, tc.num)
		}
	}
}

func TestCreateModeFlags(t *testing.T) {
	tests := []struct {
		m                                 CreateMode
		valid, ephemeral, sequential, ttl bool
	}{
		{ModePersistent, true, false, false, false},
		{ModeEphemeral, true, true, false, false},
		{ModePersistentSequential, true, false, true, false},
		{ModeEphemeralSequential, true, true, true, false},
		{ModeContainer, true, false, false, false},
		{ModePersistentWithTTL, true, false, false, true},
		{ModePersistentSequentialWithTTL, true, false, true, true},
		{7, false, false, false, false},
		{-1, false, false, false, false},
	}
	for _, tc := range tests {
		if tc.m.Valid() != tc.valid || tc.m.Ephemeral() != tc.ephemeral || tc.m.Sequential() != tc.sequential || tc.m.TTL() != tc.ttl {
			t.Errorf("%v: Valid %v Ephemeral %v Sequential %v TTL %v; want %v %v %v %v", tc.m,
				tc.m.Valid(), tc.m.Ephemeral(), tc.m.Sequential(), tc.m.TTL(), tc.valid, tc.ephemeral, tc.sequential, tc.ttl)
		}
	}
}

func TestSpecialValues(t *testing.T) {
	if XidNotification != -1 || XidPing != -2 || XidAuth != -4 || XidSetWatches != -8 {
		t.Error("special xids differ from the protocol (-1, -2, -4, -8)")
	}
	if DefaultMaxBuffer != 1048575 {
		t.Errorf("DefaultMaxBuffer = %d; want jute.maxbuffer's default 0xfffff", DefaultMaxBuffer)
	}
	if PermRead != 1 || PermWrite != 2 || PermCreate != 4 || PermDelete != 8 || PermAdmin != 16 || PermAll != 31 {
		t.Error("permission bits differ from ZooDefs.Perms")
	}
}
