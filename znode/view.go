package znode

import "github.com/zkd-io/zkd/jute"

// Read serves a read request against this view, with ZooKeeper's ACL checks and error codes, and
// returns the response record:
//
//	OpExists              *jute.ExistsRequest               → *jute.ExistsResponse
//	OpGetData             *jute.GetDataRequest              → *jute.GetDataResponse
//	OpGetACL              *jute.GetACLRequest               → *jute.GetACLResponse
//	OpGetChildren         *jute.GetChildrenRequest          → *jute.GetChildrenResponse
//	OpGetChildren2        *jute.GetChildren2Request         → *jute.GetChildren2Response
//	OpGetAllChildrenNumber *jute.GetAllChildrenNumberRequest → *jute.GetAllChildrenNumberResponse
//	OpGetEphemerals       *jute.GetEphemeralsRequest        → *jute.GetEphemeralsResponse
//	OpMultiRead           *jute.MultiRequest                → *jute.MultiResponse
//
// Paths are not validated (as in ZooKeeper): a path that names no node gives NoNode. A missing node
// is reported before an ACL failure. Children are listed in name order. session is only used by
// getEphemerals. A multiRead holding anything but getData and getChildren fails with
// MarshallingError and, as ZooKeeper does in that one case, still returns an empty
// *jute.MultiResponse to send with the error. Watch flags are the server's business and ignored.
// Returned slices (data, children, ACLs) are shared with the tree and must not be modified.
func (v *View) Read(session int64, auth []jute.Id, op jute.Op, req jute.Record) (jute.Record, error) {
	switch op {
	case jute.OpExists:
		r, ok := req.(*jute.ExistsRequest)
		if !ok || r == nil {
			return nil, jute.CodeMarshallingError
		}
		n, err := v.readable(r.Path, auth, jute.PermRead)
		if err != nil {
			return nil, err
		}
		return &jute.ExistsResponse{Stat: n.stat()}, nil
	case jute.OpGetData:
		r, ok := req.(*jute.GetDataRequest)
		if !ok || r == nil {
			return nil, jute.CodeMarshallingError
		}
		return v.getData(r.Path, auth)
	case jute.OpGetACL:
		r, ok := req.(*jute.GetACLRequest)
		if !ok || r == nil {
			return nil, jute.CodeMarshallingError
		}
		n, err := v.readable(r.Path, auth, jute.PermRead|jute.PermAdmin)
		if err != nil {
			return nil, err
		}
		acl := n.acl.list
		if !CheckACL(acl, auth, jute.PermAdmin) {
			acl = hideDigests(acl)
		}
		return &jute.GetACLResponse{ACL: acl, Stat: n.stat()}, nil
	case jute.OpGetChildren:
		r, ok := req.(*jute.GetChildrenRequest)
		if !ok || r == nil {
			return nil, jute.CodeMarshallingError
		}
		return v.getChildren(r.Path, auth)
	case jute.OpGetChildren2:
		r, ok := req.(*jute.GetChildren2Request)
		if !ok || r == nil {
			return nil, jute.CodeMarshallingError
		}
		n, err := v.readable(r.Path, auth, jute.PermRead)
		if err != nil {
			return nil, err
		}
		return &jute.GetChildren2Response{Children: childNames(n), Stat: n.stat()}, nil
	case jute.OpGetAllChildrenNumber:
		r, ok := req.(*jute.GetAllChildrenNumberRequest)
		if !ok || r == nil {
			return nil, jute.CodeMarshallingError
		}
		n, err := v.readable(r.Path, auth, jute.PermRead)
		if err != nil {
			return nil, err
		}
		return &jute.GetAllChildrenNumberResponse{TotalNumber: descendants(n)}, nil
	case jute.OpGetEphemerals:
		r, ok := req.(*jute.GetEphemeralsRequest)
		if !ok || r == nil {
			return nil, jute.CodeMarshallingError
		}
		prefix := r.PrefixPath
		if prefix == "/" {
			prefix = ""
		}
		return &jute.GetEphemeralsResponse{Ephemerals: v.ephemeralsWithPrefix(session, prefix)}, nil
	case jute.OpMultiRead:
		r, ok := req.(*jute.MultiRequest)
		if !ok || r == nil {
			return nil, jute.CodeMarshallingError
		}
		return v.multiRead(r, auth)
	}
	return nil, jute.CodeUnimplemented
}

// readable returns the node at path if auth holds one of the perm bits on it.
func (v *View) readable(path string, auth []jute.Id, perm int32) (*node, error) {
	n := v.lookup(path)
	if n == nil {
		return nil, jute.CodeNoNode
	}
	if !CheckACL(n.acl.list, auth, perm) {
		return nil, jute.CodeNoAuth
	}
	return n, nil
}

func (v *View) getData(path string, auth []jute.Id) (*jute.GetDataResponse, error) {
	n, err := v.readable(path, auth, jute.PermRead)
	if err != nil {
		return nil, err
	}
	return &jute.GetDataResponse{Data: n.data(), Stat: n.stat()}, nil
}

func (v *View) getChildren(path string, auth []jute.Id) (*jute.GetChildrenResponse, error) {
	n, err := v.readable(path, auth, jute.PermRead)
	if err != nil {
		return nil, err
	}
	return &jute.GetChildrenResponse{Children: childNames(n)}, nil
}

func childNames(n *node) []string {
	out := make([]string, 0, n.numChildren())
	n.kids.ascend(func(c *node) bool {
		out = append(out, c.name())
		return true
	})
	return out
}

// multiRead runs each op on its own: a failing op gives an error result and the others still run.
func (v *View) multiRead(req *jute.MultiRequest, auth []jute.Id) (jute.Record, error) {
	for _, op := range req.Ops {
		if op.Type != jute.OpGetData && op.Type != jute.OpGetChildren {
			return &jute.MultiResponse{}, jute.CodeMarshallingError
		}
	}
	results := make([]jute.MultiResult, len(req.Ops))
	for i, op := range req.Ops {
		var (
			resp jute.Record
			err  error
		)
		switch r := op.Req.(type) {
		case *jute.GetDataRequest:
			if r == nil {
				return &jute.MultiResponse{}, jute.CodeMarshallingError
			}
			resp, err = v.getData(r.Path, auth)
		case *jute.GetChildrenRequest:
			if r == nil {
				return &jute.MultiResponse{}, jute.CodeMarshallingError
			}
			resp, err = v.getChildren(r.Path, auth)
		default:
			return &jute.MultiResponse{}, jute.CodeMarshallingError
		}
		if err != nil {
			c := asCode(err)
			results[i] = jute.MultiResult{Type: jute.OpError, Err: c, Resp: &jute.ErrorResponse{Err: c}}
			continue
		}
		results[i] = jute.MultiResult{Type: op.Type, Resp: resp}
	}
	return &jute.MultiResponse{Results: results}, nil
}
