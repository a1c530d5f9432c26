package znode

import "github.com/zkd-io/zkd/jute"

// multi applies the ops of a multi one after the other on the working state, each seeing the
// effects of the ones before. If one fails, nothing is committed and the reply has ZooKeeper's
// failure layout: every result is of type -1, the ops before the failing one with code 0, the
// failing one with its code and the rest with RuntimeInconsistency; the header error stays 0.
// A read op, or an op that may not appear in a multi, fails the whole request with
// MarshallingError.
func (a *applier) multi(req *jute.MultiRequest) (jute.Record, bool, error) {
	for _, op := range req.Ops {
		switch op.Type {
		case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL,
			jute.OpDelete, jute.OpSetData, jute.OpCheck:
		default:
			return nil, false, jute.CodeMarshallingError
		}
		if op.Req == nil {
			return nil, false, jute.CodeMarshallingError
		}
	}
	results := make([]jute.MultiResult, len(req.Ops))
	for i, op := range req.Ops {
		res, err := a.multiOp(op)
		if err != nil {
			code := asCode(err)
			for j := range results {
				c := jute.CodeOK
				switch {
				case j == i:
					c = code
				case j > i:
					c = jute.CodeRuntimeInconsistency
				}
				results[j] = jute.MultiResult{Type: jute.OpError, Err: c, Resp: &jute.ErrorResponse{Err: c}}
			}
			a.events = nil
			return &jute.MultiResponse{Results: results}, false, nil
		}
		results[i] = res
	}
	return &jute.MultiResponse{Results: results}, true, nil
}

func (a *applier) multiOp(op jute.MultiOp) (jute.MultiResult, error) {
	switch op.Type {
	case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer:
		req, ok := op.Req.(*jute.CreateRequest)
		if !ok || req == nil {
			return jute.MultiResult{}, jute.CodeMarshallingError
		}
		res, err := a.create(op.Type, req.Path, req.Data, req.ACL, req.Flags, 0, true)
		if err != nil {
			return jute.MultiResult{}, err
		}
		t := jute.OpCreate
		if _, two := res.resp.(*jute.Create2Response); two {
			t = jute.OpCreate2
		}
		return jute.MultiResult{Type: t, Resp: res.resp}, nil
	case jute.OpCreateTTL:
		req, ok := op.Req.(*jute.CreateTTLRequest)
		if !ok || req == nil {
			return jute.MultiResult{}, jute.CodeMarshallingError
		}
		res, err := a.create(op.Type, req.Path, req.Data, req.ACL, req.Flags, req.TTL, true)
		if err != nil {
			return jute.MultiResult{}, err
		}
		return jute.MultiResult{Type: jute.OpCreate2, Resp: res.resp}, nil
	case jute.OpDelete:
		req, ok := op.Req.(*jute.DeleteRequest)
		if !ok || req == nil {
			return jute.MultiResult{}, jute.CodeMarshallingError
		}
		if err := a.delete(req.Path, req.Version); err != nil {
			return jute.MultiResult{}, err
		}
		return jute.MultiResult{Type: jute.OpDelete}, nil
	case jute.OpSetData:
		req, ok := op.Req.(*jute.SetDataRequest)
		if !ok || req == nil {
			return jute.MultiResult{}, jute.CodeMarshallingError
		}
		st, err := a.setData(req.Path, req.Data, req.Version)
		if err != nil {
			return jute.MultiResult{}, err
		}
		return jute.MultiResult{Type: jute.OpSetData, Resp: &jute.SetDataResponse{Stat: st}}, nil
	case jute.OpCheck:
		req, ok := op.Req.(*jute.CheckVersionRequest)
		if !ok || req == nil {
			return jute.MultiResult{}, jute.CodeMarshallingError
		}
		if err := a.check(req.Path, req.Version); err != nil {
			return jute.MultiResult{}, err
		}
		return jute.MultiResult{Type: jute.OpCheck}, nil
	}
	return jute.MultiResult{}, jute.CodeMarshallingError
}
