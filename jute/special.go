package jute

// ConnectRequest is the first frame a client sends. The trailing readOnly byte is optional: old
// clients and go-zookeeper leave it out, the Java client, kazoo and the C client send it.
// HasReadOnly records whether it was present, so the server can mirror it in its reply.
type ConnectRequest struct {
	ProtocolVersion int32
	LastZxidSeen    int64
	TimeOut         int32
	SessionID       int64
	Passwd          []byte
	ReadOnly        bool
	HasReadOnly     bool
}

// Encode appends r to e; the readOnly byte is written only when HasReadOnly is set.
func (r *ConnectRequest) Encode(e *Encoder) {
	e.Int32(r.ProtocolVersion)
	e.Int64(r.LastZxidSeen)
	e.Int32(r.TimeOut)
	e.Int64(r.SessionID)
	e.Buffer(r.Passwd)
	if r.HasReadOnly {
		e.Bool(r.ReadOnly)
	}
}

// Decode reads r from d; the readOnly byte is read if at least one byte is left.
func (r *ConnectRequest) Decode(d *Decoder) {
	r.ProtocolVersion = d.Int32()
	r.LastZxidSeen = d.Int64()
	r.TimeOut = d.Int32()
	r.SessionID = d.Int64()
	r.Passwd = d.Buffer()
	r.ReadOnly, r.HasReadOnly = false, false
	if d.Err() == nil && d.Len() > 0 {
		r.ReadOnly = d.Bool()
		r.HasReadOnly = true
	}
}

// ConnectResponse is the server's reply to a ConnectRequest. HasReadOnly mirrors the request.
type ConnectResponse struct {
	ProtocolVersion int32
	TimeOut         int32
	SessionID       int64
	Passwd          []byte
	ReadOnly        bool
	HasReadOnly     bool
}

// Encode appends r to e; the readOnly byte is written only when HasReadOnly is set.
func (r *ConnectResponse) Encode(e *Encoder) {
	e.Int32(r.ProtocolVersion)
	e.Int32(r.TimeOut)
	e.Int64(r.SessionID)
	e.Buffer(r.Passwd)
	if r.HasReadOnly {
		e.Bool(r.ReadOnly)
	}
}

// Decode reads r from d; the readOnly byte is read if at least one byte is left.
func (r *ConnectResponse) Decode(d *Decoder) {
	r.ProtocolVersion = d.Int32()
	r.TimeOut = d.Int32()
	r.SessionID = d.Int64()
	r.Passwd = d.Buffer()
	r.ReadOnly, r.HasReadOnly = false, false
	if d.Err() == nil && d.Len() > 0 {
		r.ReadOnly = d.Bool()
		r.HasReadOnly = true
	}
}

// MultiOp is one operation of a multi or multiRead request.
type MultiOp struct {
	Type Op
	Req  Record // *CreateRequest, *CreateTTLRequest, *DeleteRequest, *SetDataRequest, *CheckVersionRequest, *GetChildrenRequest or *GetDataRequest
}

// MultiRequest is the body of multi and multiRead: each op behind a MultiHeader, ended by a
// MultiHeader with Done set.
type MultiRequest struct {
	Ops []MultiOp
}

// Encode appends r to e.
func (r *MultiRequest) Encode(e *Encoder) {
	for _, op := range r.Ops {
		h := MultiHeader{Type: op.Type, Done: false, Err: -1}
		h.Encode(e)
		op.Req.Encode(e)
	}
	end := MultiHeader{Type: -1, Done: true, Err: -1}
	end.Encode(e)
}

// Decode reads r from d. An op type that may not appear in a multi fails with ErrUnknownOp.
func (r *MultiRequest) Decode(d *Decoder) {
	r.Ops = nil
	for d.Err() == nil {
		var h MultiHeader
		h.Decode(d)
		if d.Err() != nil || h.Done {
			return
		}
		req := newMultiOpRequest(h.Type)
		if req == nil {
			d.Fail(ErrUnknownOp)
			return
		}
		req.Decode(d)
		r.Ops = append(r.Ops, MultiOp{Type: h.Type, Req: req})
	}
}

func newMultiOpRequest(op Op) Record {
	switch op {
	case OpCreate, OpCreate2, OpCreateContainer:
		return &CreateRequest{}
	case OpCreateTTL:
		return &CreateTTLRequest{}
	case OpDelete:
		return &DeleteRequest{}
	case OpSetData:
		return &SetDataRequest{}
	case OpCheck:
		return &CheckVersionRequest{}
	case OpGetChildren:
		return &GetChildrenRequest{}
	case OpGetData:
		return &GetDataRequest{}
	}
	return nil
}

// MultiResult is one result of a multi or multiRead response. A failed op has Type OpError and its
// code in Err, with Resp an *ErrorResponse carrying the same code.
type MultiResult struct {
	Type Op
	Err  Code
	Resp Record // nil for delete and check
}

// MultiResponse is the reply to multi and multiRead.
type MultiResponse struct {
	Results []MultiResult
}

// Encode appends r to e.
func (r *MultiResponse) Encode(e *Encoder) {
	for _, res := range r.Results {
		h := MultiHeader{Type: res.Type, Done: false, Err: res.Err}
		h.Encode(e)
		if res.Resp != nil {
			res.Resp.Encode(e)
		}
	}
	end := MultiHeader{Type: -1, Done: true, Err: -1}
	end.Encode(e)
}

// Decode reads r from d. A result type that may not appear in a multi fails with ErrUnknownOp.
func (r *MultiResponse) Decode(d *Decoder) {
	r.Results = nil
	for d.Err() == nil {
		var h MultiHeader
		h.Decode(d)
		if d.Err() != nil || h.Done {
			return
		}
		var resp Record
		switch h.Type {
		case OpCreate:
			resp = &CreateResponse{}
		case OpCreate2, OpCreateContainer, OpCreateTTL:
			resp = &Create2Response{}
		case OpSetData:
			resp = &SetDataResponse{}
		case OpGetChildren:
			resp = &GetChildrenResponse{}
		case OpGetData:
			resp = &GetDataResponse{}
		case OpError:
			resp = &ErrorResponse{}
		case OpDelete, OpCheck:
		default:
			d.Fail(ErrUnknownOp)
			return
		}
		if resp != nil {
			resp.Decode(d)
		}
		r.Results = append(r.Results, MultiResult{Type: h.Type, Err: h.Err, Resp: resp})
	}
}

// NewRequest returns an empty request record for op, or nil if requests of that type have no body
// (ping, closeSession, whoAmI) or op is unknown; use Op.Known to tell the two apart.
func NewRequest(op Op) Record {
	switch op {
	case OpCreate, OpCreate2, OpCreateContainer:
		return &CreateRequest{}
	case OpCreateTTL:
		return &CreateTTLRequest{}
	case OpDelete:
		return &DeleteRequest{}
	case OpDeleteContainer:
		return &DeleteContainerRequest{}
	case OpExists:
		return &ExistsRequest{}
	case OpGetData:
		return &GetDataRequest{}
	case OpSetData:
		return &SetDataRequest{}
	case OpGetACL:
		return &GetACLRequest{}
	case OpSetACL:
		return &SetACLRequest{}
	case OpGetChildren:
		return &GetChildrenRequest{}
	case OpGetChildren2:
		return &GetChildren2Request{}
	case OpSync:
		return &SyncRequest{}
	case OpCheck:
		return &CheckVersionRequest{}
	case OpMulti, OpMultiRead:
		return &MultiRequest{}
	case OpReconfig:
		return &ReconfigRequest{}
	case OpCheckWatches:
		return &CheckWatchesRequest{}
	case OpRemoveWatches:
		return &RemoveWatchesRequest{}
	case OpAddWatch:
		return &AddWatchRequest{}
	case OpAuth:
		return &AuthPacket{}
	case OpSetWatches:
		return &SetWatches{}
	case OpSetWatches2:
		return &SetWatches2{}
	case OpSASL:
		return &GetSASLRequest{}
	case OpGetEphemerals:
		return &GetEphemeralsRequest{}
	case OpGetAllChildrenNumber:
		return &GetAllChildrenNumberRequest{}
	}
	return nil
}

// NewResponse returns an empty response record for a successful reply to op, or nil if that reply
// has no body (delete, setWatches, checkWatches, removeWatches, closeSession, auth, ping).
func NewResponse(op Op) Record {
	switch op {
	case OpCreate:
		return &CreateResponse{}
	case OpCreate2, OpCreateContainer, OpCreateTTL:
		return &Create2Response{}
	case OpExists:
		return &ExistsResponse{}
	case OpGetData, OpReconfig:
		return &GetDataResponse{}
	case OpSetData:
		return &SetDataResponse{}
	case OpGetACL:
		return &GetACLResponse{}
	case OpSetACL:
		return &SetACLResponse{}
	case OpGetChildren:
		return &GetChildrenResponse{}
	case OpGetChildren2:
		return &GetChildren2Response{}
	case OpSync:
		return &SyncResponse{}
	case OpMulti, OpMultiRead:
		return &MultiResponse{}
	case OpAddWatch:
		return &ErrorResponse{}
	case OpSASL:
		return &SetSASLResponse{}
	case OpGetEphemerals:
		return &GetEphemeralsResponse{}
	case OpGetAllChildrenNumber:
		return &GetAllChildrenNumberResponse{}
	case OpWhoAmI:
		return &WhoAmIResponse{}
	}
	return nil
}
