package jute

// RequestPath returns the path a request names (a getEphemerals' prefix; a multi's first
// operation's path), or "" for a request without one. For logs and dumps.
func RequestPath(r Record) string {
	switch b := r.(type) {
	case *CreateRequest:
		return b.Path
	case *CreateTTLRequest:
		return b.Path
	case *DeleteRequest:
		return b.Path
	case *DeleteContainerRequest:
		return b.Path
	case *SetDataRequest:
		return b.Path
	case *SetACLRequest:
		return b.Path
	case *CheckVersionRequest:
		return b.Path
	case *GetDataRequest:
		return b.Path
	case *ExistsRequest:
		return b.Path
	case *GetChildrenRequest:
		return b.Path
	case *GetChildren2Request:
		return b.Path
	case *GetACLRequest:
		return b.Path
	case *SyncRequest:
		return b.Path
	case *GetAllChildrenNumberRequest:
		return b.Path
	case *GetEphemeralsRequest:
		return b.PrefixPath
	case *AddWatchRequest:
		return b.Path
	case *CheckWatchesRequest:
		return b.Path
	case *RemoveWatchesRequest:
		return b.Path
	case *MultiRequest:
		if len(b.Ops) > 0 {
			return RequestPath(b.Ops[0].Req)
		}
	}
	return ""
}
