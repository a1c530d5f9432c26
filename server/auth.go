package server

import (
	"crypto/sha1"
	"encoding/base64"
	"strings"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// authenticate handles an auth packet. digest adds the id user:base64(sha1(user:password)) (and
// super when it equals the configured super digest); ip re-adds the implicit ip id. Any other
// scheme fails: AuthFailed, then the connection closes, as in ZooKeeper. The reply echoes the
// request xid (go-zookeeper sends auth with an ordinary xid) and carries zxid 0.
func (c *conn) authenticate(xid int32, p *jute.AuthPacket) bool {
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
		c.reply(xid, 0, jute.CodeOK, nil)
		return true
	case "ip":
		c.addAuth(jute.Id{Scheme: "ip", ID: c.ip})
		c.reply(xid, 0, jute.CodeOK, nil)
		return true
	}
	c.s.stats.authFailed.Add(1)
	c.log.Info("authentication failed", "scheme", p.Scheme)
	c.reply(xid, 0, jute.CodeAuthFailed, nil)
	c.finish()
	return false
}
