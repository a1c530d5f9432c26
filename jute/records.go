// Records of ZooKeeper's client protocol, in field order. Each has a hand-written Encode and
// Decode; see the package doc for the encoding rules.

package jute

// RequestHeader is the header of every client request frame.
type RequestHeader struct {
	Xid  int32
	Type Op
}

// Encode appends r to e.
func (r *RequestHeader) Encode(e *Encoder) {
	e.Int32(r.Xid)
	e.Int32(int32(r.Type))
}

// Decode reads r from d.
func (r *RequestHeader) Decode(d *Decoder) {
	r.Xid = d.Int32()
	r.Type = Op(d.Int32())
}

// ReplyHeader is the header of every server reply frame. A body follows only when Err is 0.
type ReplyHeader struct {
	Xid  int32
	Zxid int64
	Err  Code
}

// Encode appends r to e.
func (r *ReplyHeader) Encode(e *Encoder) {
	e.Int32(r.Xid)
	e.Int64(r.Zxid)
	e.Int32(int32(r.Err))
}

// Decode reads r from d.
func (r *ReplyHeader) Decode(d *Decoder) {
	r.Xid = d.Int32()
	r.Zxid = d.Int64()
	r.Err = Code(d.Int32())
}

// Id is an identity: a scheme and an id within it.
//
//lint:ignore ST1003 named after ZooKeeper's jute record Id, which every client's sources use
type Id struct {
	Scheme string
	ID     string
}

// Encode appends r to e.
func (r *Id) Encode(e *Encoder) {
	e.String(r.Scheme)
	e.String(r.ID)
}

// Decode reads r from d.
func (r *Id) Decode(d *Decoder) {
	r.Scheme = d.commonString()
	r.ID = d.commonString()
}

// ACL is one access-control entry.
type ACL struct {
	Perms int32
	ID    Id
}

// Encode appends r to e.
func (r *ACL) Encode(e *Encoder) {
	e.Int32(r.Perms)
	r.ID.Encode(e)
}

// Decode reads r from d.
func (r *ACL) Decode(d *Decoder) {
	r.Perms = d.Int32()
	r.ID.Decode(d)
}

// Stat is a znode's metadata as sent on the wire (68 bytes).
type Stat struct {
	Czxid          int64
	Mzxid          int64
	Ctime          int64
	Mtime          int64
	Version        int32
	Cversion       int32
	Aversion       int32
	EphemeralOwner int64
	DataLength     int32
	NumChildren    int32
	Pzxid          int64
}

// Encode appends r to e.
func (r *Stat) Encode(e *Encoder) {
	e.Int64(r.Czxid)
	e.Int64(r.Mzxid)
	e.Int64(r.Ctime)
	e.Int64(r.Mtime)
	e.Int32(r.Version)
	e.Int32(r.Cversion)
	e.Int32(r.Aversion)
	e.Int64(r.EphemeralOwner)
	e.Int32(r.DataLength)
	e.Int32(r.NumChildren)
	e.Int64(r.Pzxid)
}

// Decode reads r from d.
func (r *Stat) Decode(d *Decoder) {
	r.Czxid = d.Int64()
	r.Mzxid = d.Int64()
	r.Ctime = d.Int64()
	r.Mtime = d.Int64()
	r.Version = d.Int32()
	r.Cversion = d.Int32()
	r.Aversion = d.Int32()
	r.EphemeralOwner = d.Int64()
	r.DataLength = d.Int32()
	r.NumChildren = d.Int32()
	r.Pzxid = d.Int64()
}

// WatcherEvent is the body of a watch notification (xid -1).
type WatcherEvent struct {
	Type  EventType
	State State
	Path  string
}

// Encode appends r to e.
func (r *WatcherEvent) Encode(e *Encoder) {
	e.Int32(int32(r.Type))
	e.Int32(int32(r.State))
	e.String(r.Path)
}

// Decode reads r from d.
func (r *WatcherEvent) Decode(d *Decoder) {
	r.Type = EventType(d.Int32())
	r.State = State(d.Int32())
	r.Path = d.String()
}

// ClientInfo is one identity in a whoAmI response.
type ClientInfo struct {
	AuthScheme string
	User       string
}

// Encode appends r to e.
func (r *ClientInfo) Encode(e *Encoder) {
	e.String(r.AuthScheme)
	e.String(r.User)
}

// Decode reads r from d.
func (r *ClientInfo) Decode(d *Decoder) {
	r.AuthScheme = d.String()
	r.User = d.String()
}

// ErrorResponse carries an error code as a body: the addWatch success reply and failed multi results.
type ErrorResponse struct {
	Err Code
}

// Encode appends r to e.
func (r *ErrorResponse) Encode(e *Encoder) {
	e.Int32(int32(r.Err))
}

// Decode reads r from d.
func (r *ErrorResponse) Decode(d *Decoder) {
	r.Err = Code(d.Int32())
}

// CreateRequest is the body of create, create2 and createContainer.
type CreateRequest struct {
	Path  string
	Data  []byte
	ACL   []ACL
	Flags CreateMode
}

// Encode appends r to e.
func (r *CreateRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Buffer(r.Data)
	encodeACLs(e, r.ACL)
	e.Int32(int32(r.Flags))
}

// Decode reads r from d.
func (r *CreateRequest) Decode(d *Decoder) {
	r.Path = d.String()
	r.Data = d.Buffer()
	r.ACL = decodeACLs(d)
	r.Flags = CreateMode(d.Int32())
}

// CreateTTLRequest is the body of createTTL.
type CreateTTLRequest struct {
	Path  string
	Data  []byte
	ACL   []ACL
	Flags CreateMode
	TTL   int64
}

// Encode appends r to e.
func (r *CreateTTLRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Buffer(r.Data)
	encodeACLs(e, r.ACL)
	e.Int32(int32(r.Flags))
	e.Int64(r.TTL)
}

// Decode reads r from d.
func (r *CreateTTLRequest) Decode(d *Decoder) {
	r.Path = d.String()
	r.Data = d.Buffer()
	r.ACL = decodeACLs(d)
	r.Flags = CreateMode(d.Int32())
	r.TTL = d.Int64()
}

// CreateResponse is the reply to create: the path actually created.
type CreateResponse struct {
	Path string
}

// Encode appends r to e.
func (r *CreateResponse) Encode(e *Encoder) {
	e.String(r.Path)
}

// Decode reads r from d.
func (r *CreateResponse) Decode(d *Decoder) {
	r.Path = d.String()
}

// Create2Response is the reply to create2, createContainer and createTTL.
type Create2Response struct {
	Path string
	Stat Stat
}

// Encode appends r to e.
func (r *Create2Response) Encode(e *Encoder) {
	e.String(r.Path)
	r.Stat.Encode(e)
}

// Decode reads r from d.
func (r *Create2Response) Decode(d *Decoder) {
	r.Path = d.String()
	r.Stat.Decode(d)
}

// DeleteRequest is the body of delete; Version -1 matches any version.
type DeleteRequest struct {
	Path    string
	Version int32
}

// Encode appends r to e.
func (r *DeleteRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Int32(r.Version)
}

// Decode reads r from d.
func (r *DeleteRequest) Decode(d *Decoder) {
	r.Path = d.String()
	r.Version = d.Int32()
}

// DeleteContainerRequest is the body of deleteContainer.
type DeleteContainerRequest struct {
	Path string
}

// Encode appends r to e.
func (r *DeleteContainerRequest) Encode(e *Encoder) {
	e.String(r.Path)
}

// Decode reads r from d.
func (r *DeleteContainerRequest) Decode(d *Decoder) {
	r.Path = d.String()
}

// ExistsRequest is the body of exists.
type ExistsRequest struct {
	Path  string
	Watch bool
}

// Encode appends r to e.
func (r *ExistsRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Bool(r.Watch)
}

// Decode reads r from d.
func (r *ExistsRequest) Decode(d *Decoder) {
	r.Path = d.String()
	r.Watch = d.Bool()
}

// ExistsResponse is the reply to exists.
type ExistsResponse struct {
	Stat Stat
}

// Encode appends r to e.
func (r *ExistsResponse) Encode(e *Encoder) {
	r.Stat.Encode(e)
}

// Decode reads r from d.
func (r *ExistsResponse) Decode(d *Decoder) {
	r.Stat.Decode(d)
}

// GetDataRequest is the body of getData.
type GetDataRequest struct {
	Path  string
	Watch bool
}

// Encode appends r to e.
func (r *GetDataRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Bool(r.Watch)
}

// Decode reads r from d.
func (r *GetDataRequest) Decode(d *Decoder) {
	r.Path = d.String()
	r.Watch = d.Bool()
}

// GetDataResponse is the reply to getData (and to reconfig).
type GetDataResponse struct {
	Data []byte
	Stat Stat
}

// Encode appends r to e.
func (r *GetDataResponse) Encode(e *Encoder) {
	e.Buffer(r.Data)
	r.Stat.Encode(e)
}

// Decode reads r from d.
func (r *GetDataResponse) Decode(d *Decoder) {
	r.Data = d.Buffer()
	r.Stat.Decode(d)
}

// SetDataRequest is the body of setData; Version -1 matches any version.
type SetDataRequest struct {
	Path    string
	Data    []byte
	Version int32
}

// Encode appends r to e.
func (r *SetDataRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Buffer(r.Data)
	e.Int32(r.Version)
}

// Decode reads r from d.
func (r *SetDataRequest) Decode(d *Decoder) {
	r.Path = d.String()
	r.Data = d.Buffer()
	r.Version = d.Int32()
}

// SetDataResponse is the reply to setData.
type SetDataResponse struct {
	Stat Stat
}

// Encode appends r to e.
func (r *SetDataResponse) Encode(e *Encoder) {
	r.Stat.Encode(e)
}

// Decode reads r from d.
func (r *SetDataResponse) Decode(d *Decoder) {
	r.Stat.Decode(d)
}

// GetACLRequest is the body of getACL.
type GetACLRequest struct {
	Path string
}

// Encode appends r to e.
func (r *GetACLRequest) Encode(e *Encoder) {
	e.String(r.Path)
}

// Decode reads r from d.
func (r *GetACLRequest) Decode(d *Decoder) {
	r.Path = d.String()
}

// GetACLResponse is the reply to getACL.
type GetACLResponse struct {
	ACL  []ACL
	Stat Stat
}

// Encode appends r to e.
func (r *GetACLResponse) Encode(e *Encoder) {
	encodeACLs(e, r.ACL)
	r.Stat.Encode(e)
}

// Decode reads r from d.
func (r *GetACLResponse) Decode(d *Decoder) {
	r.ACL = decodeACLs(d)
	r.Stat.Decode(d)
}

// SetACLRequest is the body of setACL; Version is checked against aversion.
type SetACLRequest struct {
	Path    string
	ACL     []ACL
	Version int32
}

// Encode appends r to e.
func (r *SetACLRequest) Encode(e *Encoder) {
	e.String(r.Path)
	encodeACLs(e, r.ACL)
	e.Int32(r.Version)
}

// Decode reads r from d.
func (r *SetACLRequest) Decode(d *Decoder) {
	r.Path = d.String()
	r.ACL = decodeACLs(d)
	r.Version = d.Int32()
}

// SetACLResponse is the reply to setACL.
type SetACLResponse struct {
	Stat Stat
}

// Encode appends r to e.
func (r *SetACLResponse) Encode(e *Encoder) {
	r.Stat.Encode(e)
}

// Decode reads r from d.
func (r *SetACLResponse) Decode(d *Decoder) {
	r.Stat.Decode(d)
}

// GetChildrenRequest is the body of getChildren.
type GetChildrenRequest struct {
	Path  string
	Watch bool
}

// Encode appends r to e.
func (r *GetChildrenRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Bool(r.Watch)
}

// Decode reads r from d.
func (r *GetChildrenRequest) Decode(d *Decoder) {
	r.Path = d.String()
	r.Watch = d.Bool()
}

// GetChildrenResponse is the reply to getChildren.
type GetChildrenResponse struct {
	Children []string
}

// Encode appends r to e.
func (r *GetChildrenResponse) Encode(e *Encoder) {
	e.Strings(r.Children)
}

// Decode reads r from d.
func (r *GetChildrenResponse) Decode(d *Decoder) {
	r.Children = d.Strings()
}

// GetChildren2Request is the body of getChildren2.
type GetChildren2Request struct {
	Path  string
	Watch bool
}

// Encode appends r to e.
func (r *GetChildren2Request) Encode(e *Encoder) {
	e.String(r.Path)
	e.Bool(r.Watch)
}

// Decode reads r from d.
func (r *GetChildren2Request) Decode(d *Decoder) {
	r.Path = d.String()
	r.Watch = d.Bool()
}

// GetChildren2Response is the reply to getChildren2; Stat is the parent's.
type GetChildren2Response struct {
	Children []string
	Stat     Stat
}

// Encode appends r to e.
func (r *GetChildren2Response) Encode(e *Encoder) {
	e.Strings(r.Children)
	r.Stat.Encode(e)
}

// Decode reads r from d.
func (r *GetChildren2Response) Decode(d *Decoder) {
	r.Children = d.Strings()
	r.Stat.Decode(d)
}

// SyncRequest is the body of sync.
type SyncRequest struct {
	Path string
}

// Encode appends r to e.
func (r *SyncRequest) Encode(e *Encoder) {
	e.String(r.Path)
}

// Decode reads r from d.
func (r *SyncRequest) Decode(d *Decoder) {
	r.Path = d.String()
}

// SyncResponse is the reply to sync: the path, echoed.
type SyncResponse struct {
	Path string
}

// Encode appends r to e.
func (r *SyncResponse) Encode(e *Encoder) {
	e.String(r.Path)
}

// Decode reads r from d.
func (r *SyncResponse) Decode(d *Decoder) {
	r.Path = d.String()
}

// CheckVersionRequest is the body of check (only valid inside multi).
type CheckVersionRequest struct {
	Path    string
	Version int32
}

// Encode appends r to e.
func (r *CheckVersionRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Int32(r.Version)
}

// Decode reads r from d.
func (r *CheckVersionRequest) Decode(d *Decoder) {
	r.Path = d.String()
	r.Version = d.Int32()
}

// MultiHeader precedes each op of a multi request and each result of a multi response.
type MultiHeader struct {
	Type Op
	Done bool
	Err  Code
}

// Encode appends r to e.
func (r *MultiHeader) Encode(e *Encoder) {
	e.Int32(int32(r.Type))
	e.Bool(r.Done)
	e.Int32(int32(r.Err))
}

// Decode reads r from d.
func (r *MultiHeader) Decode(d *Decoder) {
	r.Type = Op(d.Int32())
	r.Done = d.Bool()
	r.Err = Code(d.Int32())
}
