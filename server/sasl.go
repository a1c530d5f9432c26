package server

import (
	"errors"
	"slices"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/sasl"
)

// saslStep runs one step of the connection's SASL exchange (op 102) with the client's token. It
// returns the reply's code and token. On success the identity sasl:<id> is added (and super for
// a configured super user) before the reply is queued, so every request admitted after it
// carries the identity. A failure is answered AuthFailed, or SessionClosedRequireSASLAuth when
// the server requires sasl, and the caller closes the connection, as ZooKeeper does. Only the
// reader calls it.
func (c *conn) saslStep(token []byte) (jute.Code, []byte) {
	cfg := c.s.cfg.SASL
	if cfg == nil {
		c.s.m.authFailed.Inc()
		c.log.Info("sasl authentication is not configured; closing the connection")
		return c.saslFailCode(), nil
	}
	if c.saslEx == nil {
		ex, err := cfg.NewExchange()
		if err != nil {
			c.s.m.authFailed.Inc()
			c.log.Warn("sasl exchange could not start", "err", err)
			return c.saslFailCode(), nil
		}
		c.saslEx = ex
	}
	reply, done, err := c.saslEx.Next(token)
	if err != nil {
		c.s.m.authFailed.Inc()
		level := "sasl authentication failed"
		if !errors.Is(err, sasl.ErrAuthFailed) {
			level = "sasl authentication error"
		}
		c.log.Info(level, "mechanism", c.saslEx.Mechanism(), "err", err)
		return c.saslFailCode(), nil
	}
	if done {
		id := c.saslEx.ID()
		c.addAuth(jute.Id{Scheme: "sasl", ID: id})
		if slices.Contains(c.s.cfg.SASLSuperUsers, id) {
			c.addAuth(jute.Id{Scheme: "super", ID: ""})
		}
		c.log.Info("sasl authentication succeeded", "mechanism", c.saslEx.Mechanism(), "id", id)
	}
	return jute.CodeOK, reply
}

// saslFailCode is the code a failed SASL exchange is answered with: ZooKeeper answers
// SessionClosedRequireSASLAuth when it requires sasl, AuthFailed otherwise.
func (c *conn) saslFailCode() jute.Code {
	if slices.Contains(c.s.cfg.EnforceAuthSchemes, "sasl") {
		return jute.CodeSessionClosedRequireSASLAuth
	}
	return jute.CodeAuthFailed
}

// authEnforced reports whether the connection may send a request of type op: with
// Config.EnforceAuthSchemes set, only auth and sasl requests are taken from a connection that has
// no identity of one of those schemes (ZooKeeper's AuthenticationHelper). Pings included.
func (c *conn) authEnforced(op jute.Op) bool {
	schemes := c.s.cfg.EnforceAuthSchemes
	if len(schemes) == 0 || op == jute.OpAuth || op == jute.OpSASL {
		return true
	}
	for _, id := range c.authIDs() {
		if slices.Contains(schemes, id.Scheme) {
			return true
		}
	}
	return false
}
