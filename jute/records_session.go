// Records about the session, its watches and the server rather than single znodes: reconfig,
// checkWatches, removeWatches, addWatch, setWatches, setWatches2, getEphemerals,
// getAllChildrenNumber, whoAmI, auth and sasl, plus the vector helpers the records share.

package jute

// ReconfigRequest is the body of reconfig; CurConfigID -1 means no check.
type ReconfigRequest struct {
	JoiningServers string
	LeavingServers string
	NewMembers     string
	CurConfigID    int64
}

// Encode appends r to e.
func (r *ReconfigRequest) Encode(e *Encoder) {
	e.String(r.JoiningServers)
	e.String(r.LeavingServers)
	e.String(r.NewMembers)
	e.Int64(r.CurConfigID)
}

// Decode reads r from d.
func (r *ReconfigRequest) Decode(d *Decoder) {
	r.JoiningServers = d.String()
	r.LeavingServers = d.String()
	r.NewMembers = d.String()
	r.CurConfigID = d.Int64()
}

// CheckWatchesRequest is the body of checkWatches.
type CheckWatchesRequest struct {
	Path string
	Type WatcherType
}

// Encode appends r to e.
func (r *CheckWatchesRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Int32(int32(r.Type))
}

// Decode reads r from d.
func (r *CheckWatchesRequest) Decode(d *Decoder) {
	r.Path = d.String()
	r.Type = WatcherType(d.Int32())
}

// RemoveWatchesRequest is the body of removeWatches.
type RemoveWatchesRequest struct {
	Path string
	Type WatcherType
}

// Encode appends r to e.
func (r *RemoveWatchesRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Int32(int32(r.Type))
}

// Decode reads r from d.
func (r *RemoveWatchesRequest) Decode(d *Decoder) {
	r.Path = d.String()
	r.Type = WatcherType(d.Int32())
}

// AddWatchRequest is the body of addWatch.
type AddWatchRequest struct {
	Path string
	Mode AddWatchMode
}

// Encode appends r to e.
func (r *AddWatchRequest) Encode(e *Encoder) {
	e.String(r.Path)
	e.Int32(int32(r.Mode))
}

// Decode reads r from d.
func (r *AddWatchRequest) Decode(d *Decoder) {
	r.Path = d.String()
	r.Mode = AddWatchMode(d.Int32())
}

// SetWatches is the body of setWatches: watches to re-register after a reconnect.
type SetWatches struct {
	RelativeZxid int64
	DataWatches  []string
	ExistWatches []string
	ChildWatches []string
}

// Encode appends r to e.
func (r *SetWatches) Encode(e *Encoder) {
	e.Int64(r.RelativeZxid)
	e.Strings(r.DataWatches)
	e.Strings(r.ExistWatches)
	e.Strings(r.ChildWatches)
}

// Decode reads r from d.
func (r *SetWatches) Decode(d *Decoder) {
	r.RelativeZxid = d.Int64()
	r.DataWatches = d.Strings()
	r.ExistWatches = d.Strings()
	r.ChildWatches = d.Strings()
}

// SetWatches2 is the body of setWatches2, which adds persistent watches.
type SetWatches2 struct {
	RelativeZxid               int64
	DataWatches                []string
	ExistWatches               []string
	ChildWatches               []string
	PersistentWatches          []string
	PersistentRecursiveWatches []string
}

// Encode appends r to e.
func (r *SetWatches2) Encode(e *Encoder) {
	e.Int64(r.RelativeZxid)
	e.Strings(r.DataWatches)
	e.Strings(r.ExistWatches)
	e.Strings(r.ChildWatches)
	e.Strings(r.PersistentWatches)
	e.Strings(r.PersistentRecursiveWatches)
}

// Decode reads r from d.
func (r *SetWatches2) Decode(d *Decoder) {
	r.RelativeZxid = d.Int64()
	r.DataWatches = d.Strings()
	r.ExistWatches = d.Strings()
	r.ChildWatches = d.Strings()
	r.PersistentWatches = d.Strings()
	r.PersistentRecursiveWatches = d.Strings()
}

// GetEphemeralsRequest is the body of getEphemerals.
type GetEphemeralsRequest struct {
	PrefixPath string
}

// Encode appends r to e.
func (r *GetEphemeralsRequest) Encode(e *Encoder) {
	e.String(r.PrefixPath)
}

// Decode reads r from d.
func (r *GetEphemeralsRequest) Decode(d *Decoder) {
	r.PrefixPath = d.String()
}

// GetEphemeralsResponse is the reply to getEphemerals.
type GetEphemeralsResponse struct {
	Ephemerals []string
}

// Encode appends r to e.
func (r *GetEphemeralsResponse) Encode(e *Encoder) {
	e.Strings(r.Ephemerals)
}

// Decode reads r from d.
func (r *GetEphemeralsResponse) Decode(d *Decoder) {
	r.Ephemerals = d.Strings()
}

// GetAllChildrenNumberRequest is the body of getAllChildrenNumber.
type GetAllChildrenNumberRequest struct {
	Path string
}

// Encode appends r to e.
func (r *GetAllChildrenNumberRequest) Encode(e *Encoder) {
	e.String(r.Path)
}

// Decode reads r from d.
func (r *GetAllChildrenNumberRequest) Decode(d *Decoder) {
	r.Path = d.String()
}

// GetAllChildrenNumberResponse is the reply to getAllChildrenNumber.
type GetAllChildrenNumberResponse struct {
	TotalNumber int32
}

// Encode appends r to e.
func (r *GetAllChildrenNumberResponse) Encode(e *Encoder) {
	e.Int32(r.TotalNumber)
}

// Decode reads r from d.
func (r *GetAllChildrenNumberResponse) Decode(d *Decoder) {
	r.TotalNumber = d.Int32()
}

// WhoAmIResponse is the reply to whoAmI.
type WhoAmIResponse struct {
	ClientInfo []ClientInfo
}

// Encode appends r to e.
func (r *WhoAmIResponse) Encode(e *Encoder) {
	encodeClientInfos(e, r.ClientInfo)
}

// Decode reads r from d.
func (r *WhoAmIResponse) Decode(d *Decoder) {
	r.ClientInfo = decodeClientInfos(d)
}

// AuthPacket is the body of auth.
type AuthPacket struct {
	Type   int32
	Scheme string
	Auth   []byte
}

// Encode appends r to e.
func (r *AuthPacket) Encode(e *Encoder) {
	e.Int32(r.Type)
	e.String(r.Scheme)
	e.Buffer(r.Auth)
}

// Decode reads r from d.
func (r *AuthPacket) Decode(d *Decoder) {
	r.Type = d.Int32()
	r.Scheme = d.String()
	r.Auth = d.Buffer()
}

// GetSASLRequest is the body of sasl.
type GetSASLRequest struct {
	Token []byte
}

// Encode appends r to e.
func (r *GetSASLRequest) Encode(e *Encoder) {
	e.Buffer(r.Token)
}

// Decode reads r from d.
func (r *GetSASLRequest) Decode(d *Decoder) {
	r.Token = d.Buffer()
}

// SetSASLResponse is the reply to sasl.
type SetSASLResponse struct {
	Token []byte
}

// Encode appends r to e.
func (r *SetSASLResponse) Encode(e *Encoder) {
	e.Buffer(r.Token)
}

// Decode reads r from d.
func (r *SetSASLResponse) Decode(d *Decoder) {
	r.Token = d.Buffer()
}

// recordPtr is a pointer to a record value, so vectors of records can be stored as []T.
type recordPtr[T any] interface {
	*T
	Record
}

// encodeVector appends a vector of records; nil is written as a null vector (count -1).
func encodeVector[T any, P recordPtr[T]](e *Encoder, v []T) {
	if v == nil {
		e.Int32(-1)
		return
	}
	e.Int32(int32(len(v)))
	for i := range v {
		P(&v[i]).Encode(e)
	}
}

// decodeVector reads a vector of records, each at least minElem bytes on the wire (the count is
// checked against the bytes left before anything is allocated). A null vector gives nil.
func decodeVector[T any, P recordPtr[T]](d *Decoder, minElem int) []T {
	n := d.VectorLen(minElem)
	if d.Err() != nil || n < 0 {
		return nil
	}
	v := make([]T, n)
	for i := range v {
		P(&v[i]).Decode(d)
	}
	if d.Err() != nil {
		return nil
	}
	return v
}

func encodeACLs(e *Encoder, v []ACL) { encodeVector(e, v) }

// decodeACLs reads a vector of ACL entries (each at least 12 bytes: perms and two lengths).
func decodeACLs(d *Decoder) []ACL { return decodeVector[ACL](d, 12) }

func encodeClientInfos(e *Encoder, v []ClientInfo) { encodeVector(e, v) }

// decodeClientInfos reads a vector of ClientInfo (each at least 8 bytes: two lengths).
func decodeClientInfos(d *Decoder) []ClientInfo { return decodeVector[ClientInfo](d, 8) }
