package jute

import "strconv"

// Op is a ZooKeeper request type (ZooDefs.OpCode).
type Op int32

// Op codes of ZooKeeper 3.9's client protocol. OpCreateSession and OpCloseSession are negative as in
// ZooKeeper; OpError is the transaction type ZooKeeper uses for failed writes and the result type of a
// failed op inside a multi.
const (
	OpNotification         Op = 0
	OpCreate               Op = 1
	OpDelete               Op = 2
	OpExists               Op = 3
	OpGetData              Op = 4
	OpSetData              Op = 5
	OpGetACL               Op = 6
	OpSetACL               Op = 7
	OpGetChildren          Op = 8
	OpSync                 Op = 9
	OpPing                 Op = 11
	OpGetChildren2         Op = 12
	OpCheck                Op = 13
	OpMulti                Op = 14
	OpCreate2              Op = 15
	OpReconfig             Op = 16
	OpCheckWatches         Op = 17
	OpRemoveWatches        Op = 18
	OpCreateContainer      Op = 19
	OpDeleteContainer      Op = 20
	OpCreateTTL            Op = 21
	OpMultiRead            Op = 22
	OpAuth                 Op = 100
	OpSetWatches           Op = 101
	OpSASL                 Op = 102
	OpGetEphemerals        Op = 103
	OpGetAllChildrenNumber Op = 104
	OpSetWatches2          Op = 105
	OpAddWatch             Op = 106
	OpWhoAmI               Op = 107
	OpCreateSession        Op = -10
	OpCloseSession         Op = -11
	OpError                Op = -1
)

var opNames = map[Op]string{
	OpNotification:         "notification",
	OpCreate:               "create",
	OpDelete:               "delete",
	OpExists:               "exists",
	OpGetData:              "getData",
	OpSetData:              "setData",
	OpGetACL:               "getACL",
	OpSetACL:               "setACL",
	OpGetChildren:          "getChildren",
	OpSync:                 "sync",
	OpPing:                 "ping",
	OpGetChildren2:         "getChildren2",
	OpCheck:                "check",
	OpMulti:                "multi",
	OpCreate2:              "create2",
	OpReconfig:             "reconfig",
	OpCheckWatches:         "checkWatches",
	OpRemoveWatches:        "removeWatches",
	OpCreateContainer:      "createContainer",
	OpDeleteContainer:      "deleteContainer",
	OpCreateTTL:            "createTTL",
	OpMultiRead:            "multiRead",
	OpAuth:                 "auth",
	OpSetWatches:           "setWatches",
	OpSASL:                 "sasl",
	OpGetEphemerals:        "getEphemerals",
	OpGetAllChildrenNumber: "getAllChildrenNumber",
	OpSetWatches2:          "setWatches2",
	OpAddWatch:             "addWatch",
	OpWhoAmI:               "whoAmI",
	OpCreateSession:        "createSession",
	OpCloseSession:         "closeSession",
	OpError:                "error",
}

// String returns ZooKeeper's name for the op, or "op(N)" for an unknown value.
func (o Op) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// Known reports whether o is an op code of the protocol.
func (o Op) Known() bool {
	_, ok := opNames[o]
	return ok
}

// IsWrite reports whether a request of this type becomes a transaction (gets a zxid and is logged).
func (o Op) IsWrite() bool {
	switch o {
	case OpCreate, OpDelete, OpSetData, OpSetACL, OpCheck, OpMulti, OpCreate2, OpReconfig,
		OpCreateContainer, OpDeleteContainer, OpCreateTTL, OpCreateSession, OpCloseSession:
		return true
	}
	return false
}

// IsClientWrite reports whether o is a write a client sends, which a server proposes on the
// client's behalf, as opposed to the transactions servers make themselves (createSession,
// deleteContainer, reconfig) and to check, which is only valid inside a multi.
func (o Op) IsClientWrite() bool {
	switch o {
	case OpCreate, OpCreate2, OpCreateContainer, OpCreateTTL, OpDelete, OpSetData, OpSetACL,
		OpMulti, OpCloseSession:
		return true
	}
	return false
}

// Code is a ZooKeeper error code (KeeperException.Code). A non-zero Code is an error, so the packages
// above jute return Codes directly and errors.Is matches them.
type Code int32

// Error codes. There is no -126, and clients throw on codes they do not know, so never invent one.
const (
	CodeOK                           Code = 0
	CodeSystemError                  Code = -1
	CodeRuntimeInconsistency         Code = -2
	CodeDataInconsistency            Code = -3
	CodeConnectionLoss               Code = -4
	CodeMarshallingError             Code = -5
	CodeUnimplemented                Code = -6
	CodeOperationTimeout             Code = -7
	CodeBadArguments                 Code = -8
	CodeUnknownSession               Code = -12
	CodeNewConfigNoQuorum            Code = -13
	CodeReconfigInProgress           Code = -14
	CodeAPIError                     Code = -100
	CodeNoNode                       Code = -101
	CodeNoAuth                       Code = -102
	CodeBadVersion                   Code = -103
	CodeNoChildrenForEphemerals      Code = -108
	CodeNodeExists                   Code = -110
	CodeNotEmpty                     Code = -111
	CodeSessionExpired               Code = -112
	CodeInvalidCallback              Code = -113
	CodeInvalidACL                   Code = -114
	CodeAuthFailed                   Code = -115
	CodeSessionMoved                 Code = -118
	CodeNotReadOnly                  Code = -119
	CodeEphemeralOnLocalSession      Code = -120
	CodeNoWatcher                    Code = -121
	CodeRequestTimeout               Code = -122
	CodeReconfigDisabled             Code = -123
	CodeSessionClosedRequireSASLAuth Code = -124
	CodeQuotaExceeded                Code = -125
	CodeThrottledOp                  Code = -127
)

var codeNames = map[Code]string{
	CodeOK:                           "ok",
	CodeSystemError:                  "system error",
	CodeRuntimeInconsistency:         "runtime inconsistency",
	CodeDataInconsistency:            "data inconsistency",
	CodeConnectionLoss:               "connection loss",
	CodeMarshallingError:             "marshalling error",
	CodeUnimplemented:                "unimplemented",
	CodeOperationTimeout:             "operation timeout",
	CodeBadArguments:                 "bad arguments",
	CodeUnknownSession:               "unknown session",
	CodeNewConfigNoQuorum:            "new config has no quorum",
	CodeReconfigInProgress:           "reconfig in progress",
	CodeAPIError:                     "api error",
	CodeNoNode:                       "node does not exist",
	CodeNoAuth:                       "not authorized",
	CodeBadVersion:                   "bad version",
	CodeNoChildrenForEphemerals:      "ephemeral nodes may not have children",
	CodeNodeExists:                   "node already exists",
	CodeNotEmpty:                     "node has children",
	CodeSessionExpired:               "session expired",
	CodeInvalidCallback:              "invalid callback",
	CodeInvalidACL:                   "invalid acl",
	CodeAuthFailed:                   "authentication failed",
	CodeSessionMoved:                 "session moved",
	CodeNotReadOnly:                  "not a read-only call",
	CodeEphemeralOnLocalSession:      "ephemeral node on local session",
	CodeNoWatcher:                    "no such watcher",
	CodeRequestTimeout:               "request timeout",
	CodeReconfigDisabled:             "reconfig is disabled",
	CodeSessionClosedRequireSASLAuth: "session closed: client failed to authenticate",
	CodeQuotaExceeded:                "quota exceeded",
	CodeThrottledOp:                  "op throttled due to high load",
}

// String returns a short lower-case description of the code.
func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return "code(" + strconv.Itoa(int(c)) + ")"
}

// Error implements error, so a Code can be returned and matched with errors.Is.
func (c Code) Error() string { return "zk: " + c.String() }

// Known reports whether c is one of ZooKeeper's codes.
func (c Code) Known() bool {
	_, ok := codeNames[c]
	return ok
}

// EventType is the type of a watch notification.
type EventType int32

// Event types. The server sends only NodeCreated..NodeChildrenChanged; the rest are made by clients.
const (
	EventNone                   EventType = -1
	EventNodeCreated            EventType = 1
	EventNodeDeleted            EventType = 2
	EventNodeDataChanged        EventType = 3
	EventNodeChildrenChanged    EventType = 4
	EventDataWatchRemoved       EventType = 5
	EventChildWatchRemoved      EventType = 6
	EventPersistentWatchRemoved EventType = 7
)

var eventNames = map[EventType]string{
	EventNone:                   "None",
	EventNodeCreated:            "NodeCreated",
	EventNodeDeleted:            "NodeDeleted",
	EventNodeDataChanged:        "NodeDataChanged",
	EventNodeChildrenChanged:    "NodeChildrenChanged",
	EventDataWatchRemoved:       "DataWatchRemoved",
	EventChildWatchRemoved:      "ChildWatchRemoved",
	EventPersistentWatchRemoved: "PersistentWatchRemoved",
}

// String returns ZooKeeper's name for the event type.
func (e EventType) String() string {
	if s, ok := eventNames[e]; ok {
		return s
	}
	return "event(" + strconv.Itoa(int(e)) + ")"
}

// State is a KeeperState. The server only ever sends StateSyncConnected; the others are client-side.
type State int32

// Keeper states.
const (
	StateUnknown           State = -1
	StateDisconnected      State = 0
	StateNoSyncConnected   State = 1
	StateSyncConnected     State = 3
	StateAuthFailed        State = 4
	StateConnectedReadOnly State = 5
	StateSaslAuthenticated State = 6
	StateExpired           State = -112
	StateClosed            State = 7
)

var stateNames = map[State]string{
	StateUnknown:           "Unknown",
	StateDisconnected:      "Disconnected",
	StateNoSyncConnected:   "NoSyncConnected",
	StateSyncConnected:     "SyncConnected",
	StateAuthFailed:        "AuthFailed",
	StateConnectedReadOnly: "ConnectedReadOnly",
	StateSaslAuthenticated: "SaslAuthenticated",
	StateExpired:           "Expired",
	StateClosed:            "Closed",
}

// String returns ZooKeeper's name for the state.
func (s State) String() string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// WatcherType selects watches in checkWatches and removeWatches.
type WatcherType int32

// Watcher types. Persistent and PersistentRecursive are accepted from ZooKeeper 3.9 on.
const (
	WatcherChildren            WatcherType = 1
	WatcherData                WatcherType = 2
	WatcherAny                 WatcherType = 3
	WatcherPersistent          WatcherType = 4
	WatcherPersistentRecursive WatcherType = 5
)

var watcherNames = map[WatcherType]string{
	WatcherChildren:            "Children",
	WatcherData:                "Data",
	WatcherAny:                 "Any",
	WatcherPersistent:          "Persistent",
	WatcherPersistentRecursive: "PersistentRecursive",
}

// String returns ZooKeeper's name for the watcher type.
func (w WatcherType) String() string {
	if s, ok := watcherNames[w]; ok {
		return s
	}
	return "watcher(" + strconv.Itoa(int(w)) + ")"
}

// AddWatchMode is the mode of an addWatch request.
type AddWatchMode int32

// addWatch modes.
const (
	AddWatchPersistent          AddWatchMode = 0
	AddWatchPersistentRecursive AddWatchMode = 1
)

// String returns ZooKeeper's name for the mode.
func (m AddWatchMode) String() string {
	switch m {
	case AddWatchPersistent:
		return "PERSISTENT"
	case AddWatchPersistentRecursive:
		return "PERSISTENT_RECURSIVE"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// CreateMode is the flags field of a create request.
type CreateMode int32

// Create modes (CreateMode flags).
const (
	ModePersistent                  CreateMode = 0
	ModeEphemeral                   CreateMode = 1
	ModePersistentSequential        CreateMode = 2
	ModeEphemeralSequential         CreateMode = 3
	ModeContainer                   CreateMode = 4
	ModePersistentWithTTL           CreateMode = 5
	ModePersistentSequentialWithTTL CreateMode = 6
)

var modeNames = map[CreateMode]string{
	ModePersistent:                  "PERSISTENT",
	ModeEphemeral:                   "EPHEMERAL",
	ModePersistentSequential:        "PERSISTENT_SEQUENTIAL",
	ModeEphemeralSequential:         "EPHEMERAL_SEQUENTIAL",
	ModeContainer:                   "CONTAINER",
	ModePersistentWithTTL:           "PERSISTENT_WITH_TTL",
	ModePersistentSequentialWithTTL: "PERSISTENT_SEQUENTIAL_WITH_TTL",
}

// String returns ZooKeeper's name for the mode.
func (m CreateMode) String() string {
	if s, ok := modeNames[m]; ok {
		return s
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// Valid reports whether m is one of the seven create modes.
func (m CreateMode) Valid() bool { return m >= ModePersistent && m <= ModePersistentSequentialWithTTL }

// Ephemeral reports whether nodes of this mode belong to a session.
func (m CreateMode) Ephemeral() bool { return m == ModeEphemeral || m == ModeEphemeralSequential }

// Sequential reports whether the server appends a sequence suffix.
func (m CreateMode) Sequential() bool {
	return m == ModePersistentSequential || m == ModeEphemeralSequential || m == ModePersistentSequentialWithTTL
}

// TTL reports whether m is one of the TTL modes.
func (m CreateMode) TTL() bool {
	return m == ModePersistentWithTTL || m == ModePersistentSequentialWithTTL
}

// Permission bits of an ACL entry.
const (
	PermRead   int32 = 1
	PermWrite  int32 = 2
	PermCreate int32 = 4
	PermDelete int32 = 8
	PermAdmin  int32 = 16
	PermAll    int32 = 31
)

// Special xids.
const (
	XidNotification int32 = -1
	XidPing         int32 = -2
	XidAuth         int32 = -4
	XidSetWatches   int32 = -8
)

// DefaultMaxBuffer is ZooKeeper's default jute.maxbuffer: the largest frame and the largest
// length-prefixed field accepted.
const DefaultMaxBuffer = 0xfffff
