package server

import (
	"crypto/sha1"
	"encoding/base64"
	"strings"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// authenticate applies an auth packet and reports whether it succeeded. digest adds the id
// user:base64(sha1(user:password)) (and super when it equals the configured super digest); ip
// re-adds the implicit ip id. Any other scheme fails; the caller answers AuthFailed and closes
// the connection, as ZooKeeper does. The reply echoes the request xid (go-zookeeper sends auth with
// an ordinary xid) and carries zxid 0.
func (c *conn) authenticate(p *jute.AuthPacket) bool {
	switch p.Scheme {
	case "digest":
		cred := string(p.Auth)
		var id string
		if user, pass, ok := strings.Cut(cred, ":"); ok {
			id = znode.DigestID(user, pass)
		} else {
			// ZooKeeper hashes the whole text and keeps it as the user name.
			sum := sha1.Sum(p.Auth)
			id = cred + ":" + base64.StdEncoding.EncodeToString(sum[:])
		}
		c.addAuth(jute.Id{Scheme: "digest", ID: id})
		if c.s.cfg.SuperDigest != "" && id == c.s.cfg.SuperDigest {
			c.addAuth(jute.Id{Scheme: "super", ID: ""})
		}
		return true
	case "ip":
		c.addAuth(jute.Id{Scheme: "ip", ID: c.ip})
		return true
	}
	c.s.m.authFailed.Inc()
	c.log.Info("authentication failed", "scheme", p.Scheme)
	return false
}
