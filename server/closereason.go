package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// closeReason says why a connection ended. Every connection ends with exactly one: the first
// party to close it names it (conn.abort, conn.finish), and a close that follows from it (the
// reader seeing its socket closed under it) cannot replace it. connClosed logs it, at the
// reason's level, and counts it: connections_closed_<name> in mntr and
// zkd_connections_closed_total{reason="<name>"} in /metrics.
type closeReason uint8

const (
	closeClientClosed       closeReason = iota // the client closed the socket, or it broke under it
	closeSessionClosed                         // the client closed its session (closeSession)
	closeFourLetterWord                        // a four-letter word was answered
	closeSessionless                           // no ConnectRequest came within the sessionless timeout
	closeClientIdle                            // nothing came from the client within its session timeout
	closeSessionExpired                        // the session expired, was closed elsewhere, or is unknown
	closeSessionReconnected                    // the session reconnected on a newer connection to this server
	closeSessionMoved                          // a write came after the session moved, or out of its order
	closeHandshakeRefused                      // the handshake was refused (not serving, client ahead, no session)
	closeThrottled                             // the connection throttle refused the session request
	closeTLSHandshake                          // the TLS handshake failed
	closeAuthFailed                            // authentication failed or is required
	closeProtocolError                         // a malformed or oversized frame, or an op that is refused
	closeLargeRequest                          // a large request would have gone over largeRequestMaxBytes
	closeWriteTimeout                          // a reply could not be written within the write timeout
	closeSlowConsumer                          // the client read its replies too slowly (outbound limit)
	closeOutcomeUnknown                        // a write's outcome could not be learnt
	closeNotServing                            // the server cannot reach a quorum
	closeStateRestored                         // the server replaced its tree with a snapshot
	closeDropped                               // zkdtest.DropClients
	closeShutdown                              // the server is shutting down
	closeInternalError                         // handling a request panicked
	numCloseReasons
)

// closeReasons names each reason (its metric label) and the level its connections' closes are
// logged at: Debug for what a healthy client does or is told of otherwise (a server-wide drop
// logs one Info line of its own), Info for a client or session that went wrong, Warn for what an
// operator should look into.
var closeReasons = [numCloseReasons]struct {
	name  string
	level slog.Level
}{
	closeClientClosed:       {"client_closed", slog.LevelDebug},
	closeSessionClosed:      {"session_closed", slog.LevelDebug},
	closeFourLetterWord:     {"four_letter_word", slog.LevelDebug},
	closeSessionless:        {"sessionless_timeout", slog.LevelDebug},
	closeClientIdle:         {"client_idle", slog.LevelInfo},
	closeSessionExpired:     {"session_expired", slog.LevelInfo},
	closeSessionReconnected: {"session_reconnected", slog.LevelInfo},
	closeSessionMoved:       {"session_moved", slog.LevelInfo},
	closeHandshakeRefused:   {"handshake_refused", slog.LevelInfo},
	closeThrottled:          {"connection_throttled", slog.LevelDebug},
	closeTLSHandshake:       {"tls_handshake_failed", slog.LevelDebug}, // tls.go logs the first at Info
	closeAuthFailed:         {"auth_failed", slog.LevelInfo},
	closeProtocolError:      {"protocol_error", slog.LevelWarn},
	closeLargeRequest:       {"large_request_rejected", slog.LevelInfo},
	closeWriteTimeout:       {"write_timeout", slog.LevelWarn},
	closeSlowConsumer:       {"slow_consumer", slog.LevelWarn},
	closeOutcomeUnknown:     {"outcome_unknown", slog.LevelWarn},
	closeNotServing:         {"not_serving", slog.LevelDebug},
	closeStateRestored:      {"state_restored", slog.LevelDebug},
	closeDropped:            {"dropped", slog.LevelDebug},
	closeShutdown:           {"shutdown", slog.LevelDebug},
	closeInternalError:      {"internal_error", slog.LevelError},
}

func (r closeReason) String() string { return closeReasons[r].name }

// closeError carries the reason for a connection's end up from where it was found (the
// handshake, a frame) to the reader, which closes the connection with it.
type closeError struct {
	reason closeReason
	err    error
}

func (e *closeError) Error() string { return e.err.Error() }
func (e *closeError) Unwrap() error { return e.err }

// closeWith returns err marked with the reason the connection closes for.
func closeWith(r closeReason, err error) error { return &closeError{reason: r, err: err} }

// readEnded is why a connection ends when its reader stops with err (nil: the reader stopped
// because the connection was already closing, whose reason is then kept).
func (c *conn) readEnded(err error) closeReason {
	var ce *closeError
	var ne net.Error
	switch {
	case errors.As(err, &ce):
		return ce.reason
	case err == nil, isDisconnect(err):
		return closeClientClosed
	case errors.Is(err, jute.ErrTooLarge):
		return closeProtocolError
	case errors.As(err, &ne) && ne.Timeout():
		if c.session() == 0 {
			return closeSessionless
		}
		return closeClientIdle
	case errors.Is(err, ErrServerClosed), errors.Is(err, context.Canceled):
		return closeShutdown
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return closeClientClosed // a read the socket failed
	}
	return closeProtocolError
}

// writeEnded is why a connection ends when its writer stops with err (nil: the connection was
// finished, whose reason is then kept).
func writeEnded(err error) closeReason {
	switch {
	case errors.Is(err, errSlowConsumer):
		return closeSlowConsumer
	case errors.Is(err, os.ErrDeadlineExceeded):
		return closeWriteTimeout
	}
	var ce *closeError
	if errors.As(err, &ce) {
		return ce.reason
	}
	return closeClientClosed // the peer went away: EPIPE, ECONNRESET
}

// isDisconnect reports whether err is how a socket reads once its peer closed or reset it.
func isDisconnect(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// logClosed logs and counts the end of c, once, when its goroutines are done.
func (c *conn) logClosed() {
	r, err := c.endReason, c.endErr
	c.s.m.closed[r].Inc()
	lv := closeReasons[r].level
	if !c.log.Enabled(context.Background(), lv) {
		return
	}
	attrs := []any{"reason", r.String(), "after", time.Since(c.stats.established).Round(time.Millisecond)}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	c.log.Log(context.Background(), lv, "connection closed", attrs...)
}

// closeAfterCode is why a connection closes after a reply with code that ends it (a refused
// authentication or op).
func closeAfterCode(code jute.Code) closeReason {
	switch code {
	case jute.CodeAuthFailed, jute.CodeSessionClosedRequireSASLAuth:
		return closeAuthFailed
	}
	return closeProtocolError
}
