package conformance

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/zkd-io/zkd/jute"
)

func TestHandshake(t *testing.T) {
	runChecks(t, "handshake", []check{
		{"response_without_readOnly_byte_when_request_has_none", func(t *testing.T, e *env) {
			r := e.dial()
			resp, frame, err := r.Handshake(jute.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)})
			must(t, "handshake", err)
			if len(frame) != 36 || resp.HasReadOnly {
				t.Fatalf("ConnectResponse is %d bytes (readOnly present %v); want 36 bytes without the readOnly byte", len(frame), resp.HasReadOnly)
			}
		}},
		{"response_mirrors_readOnly_byte_when_request_has_it", func(t *testing.T, e *env) {
			r := e.dial()
			resp, frame, err := r.Handshake(jute.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16), HasReadOnly: true})
			must(t, "handshake", err)
			if len(frame) != 37 || !resp.HasReadOnly || resp.ReadOnly {
				t.Fatalf("ConnectResponse is %d bytes, readOnly present %v value %v; want 37 bytes with readOnly=false", len(frame), resp.HasReadOnly, resp.ReadOnly)
			}
		}},
		{"response_protocol_version_is_zero_whatever_was_sent", func(t *testing.T, e *env) {
			r := e.dial()
			resp, _, err := r.Handshake(jute.ConnectRequest{ProtocolVersion: 7, TimeOut: 10000, Passwd: make([]byte, 16)})
			must(t, "handshake", err)
			if resp.ProtocolVersion != 0 || resp.SessionID == 0 {
				t.Fatalf("protocolVersion %d, session 0x%x; want 0 and a session", resp.ProtocolVersion, resp.SessionID)
			}
		}},
		{"new_session_gets_an_id_and_a_16_byte_password", func(t *testing.T, e *env) {
			r := e.dial()
			resp, _, err := r.Handshake(jute.ConnectRequest{TimeOut: 10000, Passwd: []byte("ignored-by-server")})
			must(t, "handshake", err)
			if resp.SessionID == 0 || len(resp.Passwd) != 16 || resp.TimeOut <= 0 {
				t.Fatalf("session 0x%x passwd %d bytes timeout %d; want a session, 16 bytes, a timeout", resp.SessionID, len(resp.Passwd), resp.TimeOut)
			}
			if resp.SessionID == -0x8000000000000000 {
				t.Fatalf("session id is the container marker 0x8000000000000000")
			}
		}},
		{"two_sessions_get_different_ids", func(t *testing.T, e *env) {
			a, b := e.raw(), e.raw()
			if a.Session.SessionID == b.Session.SessionID {
				t.Fatalf("both sessions got 0x%x", a.Session.SessionID)
			}
		}},
		{"timeout_below_minimum_is_raised", func(t *testing.T, e *env) {
			r := e.dial()
			resp, _, err := r.Handshake(jute.ConnectRequest{TimeOut: 1, Passwd: make([]byte, 16)})
			must(t, "handshake", err)
			if resp.TimeOut <= 1 {
				t.Fatalf("negotiated timeout %d for a request of 1 ms; want it raised to the minimum", resp.TimeOut)
			}
			t.Logf("minimum session timeout: %d ms", resp.TimeOut)
		}},
		{"timeout_above_maximum_is_lowered", func(t *testing.T, e *env) {
			r := e.dial()
			resp, _, err := r.Handshake(jute.ConnectRequest{TimeOut: 1 << 30, Passwd: make([]byte, 16)})
			must(t, "handshake", err)
			if resp.TimeOut >= 1<<30 || resp.TimeOut <= 0 {
				t.Fatalf("negotiated timeout %d for a request of 2^30 ms; want it lowered to the maximum", resp.TimeOut)
			}
			t.Logf("maximum session timeout: %d ms", resp.TimeOut)
		}},
		{"timeout_within_bounds_is_kept", func(t *testing.T, e *env) {
			r := e.dial()
			resp, _, err := r.Handshake(jute.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)})
			must(t, "handshake", err)
			if resp.TimeOut != 10000 {
				t.Fatalf("negotiated timeout %d; want 10000 (inside the default 2..20 ticks)", resp.TimeOut)
			}
		}},
		{"reattach_with_password_keeps_the_session", func(t *testing.T, e *env) {
			a := e.raw()
			b := e.dial()
			resp, _, err := b.Handshake(jute.ConnectRequest{TimeOut: 10000, SessionID: a.Session.SessionID, Passwd: a.Session.Passwd})
			must(t, "reattach", err)
			if resp.SessionID != a.Session.SessionID || !bytes.Equal(resp.Passwd, a.Session.Passwd) || resp.TimeOut <= 0 {
				t.Fatalf("reattach gave session 0x%x timeout %d; want 0x%x with the same password", resp.SessionID, resp.TimeOut, a.Session.SessionID)
			}
			var st jute.ExistsResponse
			_, err = b.Do(jute.OpExists, &jute.ExistsRequest{Path: e.base}, &st)
			must(t, "exists on the reattached session", err)
		}},
		{"reattach_closes_the_old_connection", func(t *testing.T, e *env) {
			a := e.raw()
			b := e.dial()
			_, _, err := b.Handshake(jute.ConnectRequest{TimeOut: 10000, SessionID: a.Session.SessionID, Passwd: a.Session.Passwd})
			must(t, "reattach", err)
			if err := a.ExpectClosed(waitTimeout); err != nil {
				t.Fatalf("old connection after reattach: %v", err)
			}
		}},
		{"reattach_renegotiates_the_timeout", func(t *testing.T, e *env) {
			a := e.rawTimeout(20000)
			b := e.dial()
			resp, _, err := b.Handshake(jute.ConnectRequest{TimeOut: 10000, SessionID: a.Session.SessionID, Passwd: a.Session.Passwd})
			must(t, "reattach", err)
			if resp.TimeOut != 10000 {
				t.Fatalf("reattach asking 10000 ms negotiated %d", resp.TimeOut)
			}
		}},
		{"reattach_with_wrong_password_gets_the_expired_response_and_close", func(t *testing.T, e *env) {
			a := e.raw()
			wrong := bytes.Clone(a.Session.Passwd)
			wrong[0] ^= 0xff
			b := e.dial()
			if !expiredHandshake(t, e, b, jute.ConnectRequest{TimeOut: 10000, SessionID: a.Session.SessionID, Passwd: wrong}) {
				return
			}
			if err := b.ExpectClosed(waitTimeout); err != nil {
				t.Fatalf("after the expired response: %v", err)
			}
		}},
		{"unknown_session_gets_the_expired_response_with_readOnly_byte", func(t *testing.T, e *env) {
			b := e.dial()
			if !expiredHandshake(t, e, b, jute.ConnectRequest{TimeOut: 10000, SessionID: 0x0dead0000beef, Passwd: make([]byte, 16), HasReadOnly: true}) {
				return
			}
			if err := b.ExpectClosed(waitTimeout); err != nil {
				t.Fatalf("after the expired response: %v", err)
			}
		}},
		{"closed_session_cannot_be_reattached", func(t *testing.T, e *env) {
			a := e.raw()
			_, err := a.Do(jute.OpCloseSession, nil, nil)
			must(t, "closeSession", err)
			b := e.dial()
			expiredHandshake(t, e, b, jute.ConnectRequest{TimeOut: 10000, SessionID: a.Session.SessionID, Passwd: a.Session.Passwd})
		}},
		{"client_ahead_of_server_is_closed_without_response", func(t *testing.T, e *env) {
			r := e.dial()
			req := jute.ConnectRequest{LastZxidSeen: 0x7fff_ffff_0000_0000, TimeOut: 10000, Passwd: make([]byte, 16)}
			must(t, "send ConnectRequest", r.WriteBytes(Frame(jute.Marshal(nil, &req))))
			if err := r.ExpectClosed(waitTimeout); err != nil {
				t.Fatalf("lastZxidSeen ahead of the server: %v", err)
			}
		}},
		{"client_that_has_seen_the_latest_zxid_is_accepted", func(t *testing.T, e *env) {
			a := e.raw()
			h, _ := rawCreate(t, a, e.p("n"), nil, jute.ModePersistent)
			b := e.dial()
			resp, _, err := b.Handshake(jute.ConnectRequest{LastZxidSeen: h.Zxid, TimeOut: 10000, Passwd: make([]byte, 16)})
			must(t, "handshake", err)
			if resp.SessionID == 0 {
				t.Fatalf("a client whose lastZxidSeen is the server's last write was refused")
			}
		}},
		{"reattach_with_lastZxidSeen_keeps_the_session", func(t *testing.T, e *env) {
			a := e.raw()
			h, _ := rawCreate(t, a, e.p("n"), nil, jute.ModePersistent)
			b := e.dial()
			resp, _, err := b.Handshake(jute.ConnectRequest{LastZxidSeen: h.Zxid, TimeOut: 10000, SessionID: a.Session.SessionID, Passwd: a.Session.Passwd})
			must(t, "reattach", err)
			if resp.SessionID != a.Session.SessionID {
				t.Fatalf("reattach with lastZxidSeen 0x%x gave session 0x%x", h.Zxid, resp.SessionID)
			}
		}},
		{"requests_pipelined_behind_the_connect_request_are_answered_in_order", func(t *testing.T, e *env) {
			r := e.dial()
			req := jute.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16), HasReadOnly: true}
			buf := Frame(jute.Marshal(nil, &req))
			buf = append(buf, EncodeRequest(jute.XidAuth, jute.OpAuth, &jute.AuthPacket{Scheme: "digest", Auth: []byte("pipe:pw")})...)
			buf = append(buf, EncodeRequest(jute.XidSetWatches, jute.OpSetWatches, &jute.SetWatches{RelativeZxid: 0, DataWatches: []string{}, ExistWatches: []string{e.p("later")}, ChildWatches: []string{}})...)
			buf = append(buf, EncodeRequest(1, jute.OpExists, &jute.ExistsRequest{Path: e.base})...)
			must(t, "write the batch", r.WriteBytes(buf))
			b, err := r.ReadFrame()
			must(t, "read ConnectResponse", err)
			var resp jute.ConnectResponse
			must(t, "decode ConnectResponse", jute.Unmarshal(b, 0, &resp))
			if resp.SessionID == 0 {
				t.Fatalf("no session")
			}
			for _, xid := range []int32{jute.XidAuth, jute.XidSetWatches, 1} {
				rep, err := r.ReadReply()
				must(t, "read reply", err)
				if rep.Header.Xid != xid || rep.Header.Err != 0 {
					t.Fatalf("reply %+v; want xid %d with err 0", rep.Header, xid)
				}
			}
		}},
		{"ping_reply_has_xid_minus_2", func(t *testing.T, e *env) {
			r := e.raw()
			must(t, "send ping", r.Send(jute.XidPing, jute.OpPing, nil))
			rep, err := r.ReadReply()
			must(t, "read ping reply", err)
			if rep.Header.Xid != jute.XidPing || rep.Header.Err != 0 || len(rep.Body) != 0 {
				t.Fatalf("ping reply %+v body %d bytes; want xid -2, err 0, no body", rep.Header, len(rep.Body))
			}
		}},
		{"ping_reply_zxid_is_the_last_processed_zxid", func(t *testing.T, e *env) {
			r := e.raw()
			h, _ := rawCreate(t, r, e.p("n"), nil, jute.ModePersistent)
			must(t, "send ping", r.Send(jute.XidPing, jute.OpPing, nil))
			rep, err := r.ReadReply()
			must(t, "read ping reply", err)
			if rep.Header.Zxid < h.Zxid {
				t.Fatalf("ping reply zxid 0x%x is before this session's last write 0x%x", rep.Header.Zxid, h.Zxid)
			}
		}},
		{"auth_reply_echoes_a_positive_xid_with_zxid_zero", func(t *testing.T, e *env) {
			r := e.raw()
			rep, err := r.CallXid(42, jute.OpAuth, &jute.AuthPacket{Scheme: "digest", Auth: []byte("u:p")})
			must(t, "auth", err)
			if rep.Header.Xid != 42 || rep.Header.Err != 0 || rep.Header.Zxid != 0 || len(rep.Body) != 0 {
				t.Fatalf("auth reply %+v body %d bytes; want xid 42, zxid 0, err 0, no body", rep.Header, len(rep.Body))
			}
		}},
		{"auth_reply_echoes_xid_minus_4", func(t *testing.T, e *env) {
			r := e.raw()
			rep, err := r.CallXid(jute.XidAuth, jute.OpAuth, &jute.AuthPacket{Scheme: "digest", Auth: []byte("u:p")})
			must(t, "auth", err)
			if rep.Header.Xid != jute.XidAuth || rep.Header.Err != 0 {
				t.Fatalf("auth reply %+v; want xid -4 err 0", rep.Header)
			}
		}},
		{"close_session_replies_without_body_then_closes", func(t *testing.T, e *env) {
			r := e.raw()
			rep, err := r.Call(jute.OpCloseSession, nil)
			must(t, "closeSession", err)
			if rep.Header.Err != 0 || len(rep.Body) != 0 {
				t.Fatalf("closeSession reply %+v body %d; want err 0 and no body", rep.Header, len(rep.Body))
			}
			if err := r.ExpectClosed(waitTimeout); err != nil {
				t.Fatalf("after closeSession: %v", err)
			}
		}},
		{"requests_after_close_session_get_no_reply", func(t *testing.T, e *env) {
			r := e.raw()
			buf := EncodeRequest(1, jute.OpCloseSession, nil)
			buf = append(buf, EncodeRequest(2, jute.OpExists, &jute.ExistsRequest{Path: e.base})...)
			must(t, "write", r.WriteBytes(buf))
			got, err := r.ReadUntilClosed(waitTimeout)
			must(t, "read until close", err)
			if len(got) == 0 || got[0].Header.Xid != 1 || got[0].Header.Err != 0 {
				t.Fatalf("got %+v; want the closeSession reply first", got)
			}
			for _, rep := range got[1:] {
				switch {
				case rep.Header.Err == jute.CodeSessionExpired:
					// The race ZooKeeper documents: the request was touched before the close.
					e.seen("request pipelined behind closeSession got SessionExpired")
				case !e.tg.Standalone():
					// A ZooKeeper 3.8 follower still answers a read pipelined behind closeSession.
					e.seen("cluster answered a request pipelined behind closeSession: %+v", rep.Header)
				default:
					t.Fatalf("got %+v; want only the closeSession reply (or SessionExpired after it)", got)
				}
			}
		}},
		{"readOnly_request_on_a_read_write_server_gets_readOnly_false", func(t *testing.T, e *env) {
			r := e.dial()
			resp, _, err := r.Handshake(jute.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16), ReadOnly: true, HasReadOnly: true})
			must(t, "handshake", err)
			if resp.SessionID == 0 || !resp.HasReadOnly || resp.ReadOnly {
				t.Fatalf("response %+v; want a session and readOnly=false", resp)
			}
			_, err = r.Do(jute.OpCreate, &jute.CreateRequest{Path: e.p("w"), ACL: openACL()}, &jute.CreateResponse{})
			must(t, "write on a read-write server", err)
		}},
		{"four_letter_word_after_handshake_is_not_a_command", func(t *testing.T, e *env) {
			r := e.raw()
			must(t, "write ruok", r.WriteBytes([]byte("ruok")))
			if err := r.ExpectClosed(waitTimeout); err != nil {
				t.Fatalf("ruok inside a session (a 1.9 GB frame length): %v", err)
			}
		}},
	})
}

// expiredHandshake sends req, which names a session the server must not reattach, on b and checks
// the reply is the expired response. It reports whether there was one: real ZooKeeper now and
// then closes such a connection without answering (go-zookeeper takes an EOF there for expiry),
// which is recorded for it; zkd must always answer.
func expiredHandshake(t *testing.T, e *env, b *Raw, req jute.ConnectRequest) bool {
	t.Helper()
	resp, frame, err := b.Handshake(req)
	if errors.Is(err, io.EOF) && !e.isZkd() {
		e.seen("connection closed without a ConnectResponse for session %#x", req.SessionID)
		return false
	}
	must(t, "handshake", err)
	wantExpiredResponse(t, resp, frame, req.HasReadOnly)
	return true
}

// wantExpiredResponse checks ZooKeeper's answer to a bad or dead session: timeOut 0, session 0,
// 16 zero bytes of password, with the readOnly byte only if the request had it.
func wantExpiredResponse(t *testing.T, resp jute.ConnectResponse, frame []byte, readOnly bool) {
	t.Helper()
	if resp.TimeOut != 0 || resp.SessionID != 0 || !bytes.Equal(resp.Passwd, make([]byte, 16)) || resp.HasReadOnly != readOnly {
		t.Fatalf("ConnectResponse %+v (%d bytes); want timeOut 0, session 0, 16 zero bytes, readOnly byte %v", resp, len(frame), readOnly)
	}
}
