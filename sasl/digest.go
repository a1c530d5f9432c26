package sasl

import (
	"crypto/md5"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ZooKeeper's fixed DIGEST-MD5 names: the service ("protocol") and the server name, which is
// also the only realm the server offers. Clients build the digest-uri "zookeeper/zk-sasl-md5"
// from them.
const (
	digestService = "zookeeper"
	digestRealm   = "zk-sasl-md5"
	// maxDigestResponse is RFC 2831's bound on the client's digest-response.
	maxDigestResponse = 4096
)

// ErrAuthFailed is returned by an Exchange when the client's credentials are wrong or its
// messages do not follow the mechanism. Its wrapped detail is for logs only; the client learns
// nothing but AuthFailed.
var ErrAuthFailed = errors.New("sasl: authentication failed")

func failf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrAuthFailed, fmt.Sprintf(format, args...))
}

// digestExchange is the server side of one DIGEST-MD5 authentication (RFC 2831, qop "auth"
// only: no integrity or privacy layer, as ZooKeeper's clients negotiate it).
type digestExchange struct {
	cfg   *Config
	step  int
	nonce string
	id    string
	// realm and service are ZooKeeper's fixed names (tests set RFC 2831's example's).
	realm, service string
}

func newDigestExchange(cfg *Config) (*digestExchange, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("sasl: nonce: %w", err)
	}
	return &digestExchange{cfg: cfg, nonce: base64.StdEncoding.EncodeToString(b[:]), realm: digestRealm, service: digestService}, nil
}

func (d *digestExchange) Mechanism() string { return "DIGEST-MD5" }
func (d *digestExchange) ID() string        { return d.id }

func (d *digestExchange) Next(token []byte) ([]byte, bool, error) {
	d.step++
	switch d.step {
	case 1:
		// DIGEST-MD5 has no initial response: the client opens with an empty token.
		if len(token) != 0 {
			return nil, false, failf("DIGEST-MD5 takes no initial response")
		}
		ch := fmt.Sprintf(`realm="%s",nonce="%s",qop="auth",charset=utf-8,algorithm=md5-sess`, d.realm, d.nonce)
		return []byte(ch), false, nil
	case 2:
		rsp, err := d.verify(token)
		if err != nil {
			return nil, false, err
		}
		return rsp, true, nil
	}
	return nil, false, failf("DIGEST-MD5 exchange already finished")
}

// verify checks the client's digest-response and returns the server's response-auth.
func (d *digestExchange) verify(token []byte) ([]byte, error) {
	if len(token) > maxDigestResponse {
		return nil, failf("digest-response of %d bytes is longer than %d", len(token), maxDigestResponse)
	}
	dir, err := ParseDirectives(string(token))
	if err != nil {
		return nil, failf("digest-response: %v", err)
	}
	get := func(k string) (string, bool) { v, ok := dir[k]; return v, ok }
	if cs, ok := get("charset"); ok && !strings.EqualFold(cs, "utf-8") {
		return nil, failf("charset %q is not utf-8", cs)
	}
	user, ok := get("username")
	if !ok || user == "" {
		return nil, failf("no username")
	}
	realm, hasRealm := get("realm")
	if hasRealm && realm != d.realm {
		return nil, failf("realm %q is not %q", realm, d.realm)
	}
	if n, _ := get("nonce"); subtle.ConstantTimeCompare([]byte(n), []byte(d.nonce)) != 1 {
		return nil, failf("nonce does not match the challenge")
	}
	cnonce, ok := get("cnonce")
	if !ok || cnonce == "" {
		return nil, failf("no cnonce")
	}
	if nc, _ := get("nc"); nc != "00000001" {
		return nil, failf("nonce-count %q is not 00000001", nc)
	}
	qop, ok := get("qop")
	if !ok {
		qop = "auth"
	}
	if qop != "auth" {
		return nil, failf("qop %q was not offered", qop)
	}
	if _, ok := get("cipher"); ok {
		return nil, failf("cipher given without qop auth-conf")
	}
	uri, ok := get("digest-uri")
	if !ok {
		return nil, failf("no digest-uri")
	}
	serv, host, _ := strings.Cut(uri, "/")
	if !strings.EqualFold(serv, d.service) || !strings.EqualFold(host, d.realm) {
		return nil, failf("digest-uri %q is not %s/%s", uri, d.service, d.realm)
	}
	got, ok := get("response")
	if !ok || len(got) != 32 {
		return nil, failf("response is not 32 hex digits")
	}
	authzid, hasAuthzid := get("authzid")
	if a, ok := get("algorithm"); ok && a != "md5-sess" {
		return nil, failf("algorithm %q is not md5-sess", a)
	}
	pass, known := d.cfg.password(user)
	if !known {
		// Compute anyway, so an unknown user takes as long as a wrong password.
		pass = d.nonce
	}
	if !hasRealm {
		realm = ""
	}
	// A1 = { H( { username-value, ":", realm-value, ":", passwd } ), ":", nonce-value, ":",
	//        cnonce-value [ ":", authzid-value ] }
	inner := md5.Sum(joinBytes(charsetBytes(user), []byte(":"), charsetBytes(realm),
		[]byte(":"), charsetBytes(pass)))
	a1 := joinBytes(inner[:], []byte(":"+d.nonce+":"+cnonce))
	if hasAuthzid {
		a1 = joinBytes(a1, []byte(":"+authzid))
	}
	ha1 := hexMD5(a1)
	nc := "00000001"
	want := hexMD5([]byte(ha1 + ":" + d.nonce + ":" + nc + ":" + cnonce + ":" + qop + ":" + hexMD5([]byte("AUTHENTICATE:"+uri))))
	if subtle.ConstantTimeCompare([]byte(strings.ToLower(got)), []byte(want)) != 1 || !known {
		return nil, failf("wrong password for user %q (or no such user)", user)
	}
	id, err := d.cfg.canonical(user)
	if err != nil {
		return nil, failf("user %q: %v", user, err)
	}
	d.id = id
	rspauth := hexMD5([]byte(ha1 + ":" + d.nonce + ":" + nc + ":" + cnonce + ":" + qop + ":" + hexMD5([]byte(":"+uri))))
	return []byte("rspauth=" + rspauth), nil
}

func hexMD5(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

func joinBytes(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// charsetBytes encodes s as RFC 2831 asks: with charset=utf-8, a string whose every character
// fits in ISO 8859-1 is hashed in ISO 8859-1, any other in UTF-8. Without charset the client
// sent ISO 8859-1 bytes, which are not valid UTF-8 once past ASCII and are hashed as they came.
func charsetBytes(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff || r == utf8.RuneError {
			return []byte(s)
		}
		out = append(out, byte(r))
	}
	return out
}

// ParseDirectives parses an RFC 2831 directive list: comma-separated name=value pairs, a value
// being a token or a quoted string (with backslash quoting), blanks allowed around the
// separators and empty list elements skipped. Names are compared without case and returned in
// lower case; a name given twice is an error (every directive a response may carry appears at
// most once).
func ParseDirectives(s string) (map[string]string, error) {
	out := map[string]string{}
	i := 0
	skipLWS := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') {
			i++
		}
	}
	for {
		skipLWS()
		for i < len(s) && s[i] == ',' {
			i++
			skipLWS()
		}
		if i >= len(s) {
			return out, nil
		}
		start := i
		for i < len(s) && isTokenChar(s[i]) {
			i++
		}
		if i == start {
			return nil, fmt.Errorf("expected a directive name at byte %d", i)
		}
		name := strings.ToLower(s[start:i])
		skipLWS()
		if i >= len(s) || s[i] != '=' {
			return nil, fmt.Errorf("directive %q has no value", name)
		}
		i++
		skipLWS()
		var val string
		if i < len(s) && s[i] == '"' {
			i++
			var b strings.Builder
			closed := false
			for i < len(s) {
				c := s[i]
				i++
				if c == '"' {
					closed = true
					break
				}
				if c == '\\' {
					if i >= len(s) {
						break
					}
					c = s[i]
					i++
				}
				b.WriteByte(c)
			}
			if !closed {
				return nil, fmt.Errorf("directive %q: unterminated quoted string", name)
			}
			val = b.String()
		} else {
			start := i
			for i < len(s) && isTokenChar(s[i]) {
				i++
			}
			val = s[start:i]
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("directive %q given twice", name)
		}
		out[name] = val
		skipLWS()
		if i < len(s) && s[i] != ',' {
			return nil, fmt.Errorf("directive %q: unexpected %q after the value", name, s[i])
		}
	}
}

// isTokenChar reports whether c may appear in an RFC 2616 token: any visible ASCII character
// but the separators.
func isTokenChar(c byte) bool {
	if c <= ' ' || c >= 0x7f {
		return false
	}
	return !strings.ContainsRune(`()<>@,;:\"/[]?={}`, rune(c))
}
