package znode

import (
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"net/netip"
	"strings"

	"github.com/zkd-io/zkd/jute"
)

// aclSet is an interned ACL list: nodes with equal ACLs share one aclSet, so a million nodes with
// the default ACL cost one pointer each. The list must never be modified.
type aclSet struct {
	list []jute.ACL
	key  string // the list's canonical encoding; equal lists have equal keys
}

// maxInterned bounds the interning table. When it is full the table starts afresh: nodes keep the
// sets they point to, only sharing with later writes is lost, so hostile clients cannot grow it
// without bound.
const maxInterned = 1 << 16

type aclInterner struct {
	sets map[string]*aclSet
	buf  []byte
}

func aclKey(buf []byte, list []jute.ACL) []byte {
	buf = buf[:0]
	for _, a := range list {
		buf = binary.BigEndian.AppendUint32(buf, uint32(a.Perms))
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(a.ID.Scheme)))
		buf = append(buf, a.ID.Scheme...)
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(a.ID.ID)))
		buf = append(buf, a.ID.ID...)
	}
	return buf
}

// intern returns the shared set equal to list, keeping a copy of list if it is new.
func (in *aclInterner) intern(list []jute.ACL) *aclSet {
	in.buf = aclKey(in.buf, list)
	if s, ok := in.sets[string(in.buf)]; ok {
		return s
	}
	if in.sets == nil || len(in.sets) >= maxInterned {
		in.sets = make(map[string]*aclSet)
	}
	s := &aclSet{list: cloneACL(list), key: string(in.buf)}
	in.sets[s.key] = s
	return s
}

func cloneACL(list []jute.ACL) []jute.ACL {
	out := make([]jute.ACL, len(list))
	copy(out, list)
	return out
}

// DigestID returns the digest scheme id for a user and password as ZooKeeper computes it:
// "user:" followed by base64(sha1("user:password")).
func DigestID(user, password string) string {
	sum := sha1.Sum([]byte(user + ":" + password))
	return user + ":" + base64.StdEncoding.EncodeToString(sum[:])
}

// CheckACL reports whether a caller with the identities auth may do perm on a node with the given
// ACL, by ZooKeeper's rules: an empty ACL allows everything, a "super" identity bypasses every
// check, and otherwise some entry must carry a bit of perm and match one of the identities (world
// anyone matches all; digest ids match exactly; ip entries match addresses inside their prefix).
func CheckACL(acl []jute.ACL, auth []jute.Id, perm int32) bool {
	if len(acl) == 0 {
		return true
	}
	for _, id := range auth {
		if id.Scheme == "super" {
			return true
		}
	}
	for _, a := range acl {
		if a.Perms&perm == 0 {
			continue
		}
		switch a.ID.Scheme {
		case "world":
			if a.ID.ID == "anyone" {
				return true
			}
		case "ip":
			for _, id := range auth {
				if id.Scheme == "ip" && ipMatches(id.ID, a.ID.ID) {
					return true
				}
			}
		case "digest", "x509":
			for _, id := range auth {
				if id.Scheme == a.ID.Scheme && id.ID == a.ID.ID {
					return true
				}
			}
		case "sasl":
			// ZooKeeper's SASLAuthenticationProvider.matches: the sasl user "super" matches
			// every sasl entry.
			for _, id := range auth {
				if id.Scheme == "sasl" && (id.ID == a.ID.ID || id.ID == "super") {
					return true
				}
			}
		}
	}
	return false
}

// authenticatedScheme reports whether ids of the scheme name a real identity, so that the "auth"
// ACL scheme expands to them (ip ids do not; sasl ids only where the sasl scheme is enabled).
func authenticatedScheme(scheme string, sasl bool) bool {
	return scheme == "digest" || scheme == "x509" || (scheme == "sasl" && sasl)
}

// fixupACL validates an ACL from create or setACL as ZooKeeper's PrepRequestProcessor.fixupACL
// does: duplicates are dropped, an empty result is invalid, world must be "anyone", "auth" entries
// become one entry per authenticated identity of the caller (none is invalid), digest ids must be
// "user:hash", ip ids addresses with an optional prefix length and x509 ids X.500 names. Any
// other scheme is invalid (ZooKeeper registers no other provider by default), but sasl when sasl
// is true: its ids must parse as Kerberos names, as SASLAuthenticationProvider.isValid requires.
// (ZooKeeper accepts x509 entries only once TLS loaded its x509 provider; zkd always does.)
func fixupACL(acl []jute.ACL, auth []jute.Id, sasl bool) ([]jute.ACL, error) {
	if plainACL(acl) {
		return acl, nil // the common case: nothing to drop or expand, so no copy
	}
	uniq := make([]jute.ACL, 0, len(acl))
	var seen map[jute.ACL]struct{} // for long lists, so hostile input stays linear
	if len(acl) > 8 {
		seen = make(map[jute.ACL]struct{}, len(acl))
	}
	for _, a := range acl {
		dup := false
		if seen != nil {
			_, dup = seen[a]
			seen[a] = struct{}{}
		} else {
			for _, u := range uniq {
				if u == a {
					dup = true
					break
				}
			}
		}
		if !dup {
			uniq = append(uniq, a)
		}
	}
	if len(uniq) == 0 {
		return nil, jute.CodeInvalidACL
	}
	out := uniq[:0:0]
	for _, a := range uniq {
		switch a.ID.Scheme {
		case "world":
			if a.ID.ID != "anyone" {
				return nil, jute.CodeInvalidACL
			}
			out = append(out, a)
		case "auth":
			found := false
			for _, id := range auth {
				if authenticatedScheme(id.Scheme, sasl) {
					found = true
					out = append(out, jute.ACL{Perms: a.Perms, ID: id})
				}
			}
			if !found {
				return nil, jute.CodeInvalidACL
			}
		case "digest":
			if !validDigest(a.ID.ID) {
				return nil, jute.CodeInvalidACL
			}
			out = append(out, a)
		case "ip":
			if _, _, ok := parseIPExpr(a.ID.ID); !ok {
				return nil, jute.CodeInvalidACL
			}
			out = append(out, a)
		case "x509":
			if !validX500Name(a.ID.ID) {
				return nil, jute.CodeInvalidACL
			}
			out = append(out, a)
		case "sasl":
			if !sasl || !validKerberosName(a.ID.ID) {
				return nil, jute.CodeInvalidACL
			}
			out = append(out, a)
		default:
			return nil, jute.CodeInvalidACL
		}
	}
	return out, nil
}

// plainACL reports whether a short ACL is already in fixupACL's output form: non-empty, without
// duplicates or "auth" entries, and every entry valid.
func plainACL(acl []jute.ACL) bool {
	if len(acl) == 0 || len(acl) > 8 {
		return false
	}
	for i, a := range acl {
		switch a.ID.Scheme {
		case "world":
			if a.ID.ID != "anyone" {
				return false
			}
		case "digest":
			if !validDigest(a.ID.ID) {
				return false
			}
		case "ip":
			if _, _, ok := parseIPExpr(a.ID.ID); !ok {
				return false
			}
		case "x509":
			if !validX500Name(a.ID.ID) {
				return false
			}
		default:
			return false
		}
		for _, b := range acl[:i] {
			if a == b {
				return false
			}
		}
	}
	return true
}

// validDigest mirrors Java's id.split(":").length == 2: exactly one colon with something after it.
func validDigest(id string) bool {
	i := strings.IndexByte(id, ':')
	return i >= 0 && i < len(id)-1 && strings.IndexByte(id[i+1:], ':') < 0
}

// parseIPExpr parses an ip ACL id, "address[/bits]", with IPv4 as ZooKeeper's provider reads it
// (four dot-separated decimal parts of 0-255) and IPv6 as 3.9.4 accepts it.
func parseIPExpr(expr string) (addr []byte, bits int, ok bool) {
	a, b, hasBits := strings.Cut(expr, "/")
	addr = parseIP(a)
	if addr == nil {
		return nil, 0, false
	}
	bits = len(addr) * 8
	if hasBits {
		v, ok := javaAtoi(b)
		if !ok || v < 0 || v > len(addr)*8 {
			return nil, 0, false
		}
		bits = v
	}
	return addr, bits, true
}

func parseIP(s string) []byte {
	if strings.IndexByte(s, ':') >= 0 {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return nil
		}
		b := a.As16()
		return b[:]
	}
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return nil
	}
	out := make([]byte, 4)
	for i, p := range parts {
		v, ok := javaAtoi(p)
		if !ok || v < 0 || v > 255 {
			return nil
		}
		out[i] = byte(v)
	}
	return out
}

// javaAtoi parses an int as Java's Integer.parseInt does: an optional sign, then decimal digits.
func javaAtoi(s string) (int, bool) {
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "" || len(s) > 10 {
		return 0, false
	}
	v := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		v = v*10 + int(s[i]-'0')
	}
	if v > 1<<31 || (!neg && v == 1<<31) {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

// ipMatches reports whether the caller's address id lies inside the ACL expression's prefix.
func ipMatches(id, expr string) bool {
	aclAddr, bits, ok := parseIPExpr(expr)
	if !ok {
		return false
	}
	remote := parseIP(id)
	if len(remote) != len(aclAddr) {
		return false
	}
	for i := range aclAddr {
		mask := byte(0xff)
		switch {
		case bits >= 8*(i+1):
		case bits <= 8*i:
			mask = 0
		default:
			mask = ^byte(0xff >> (bits - 8*i))
		}
		if aclAddr[i]&mask != remote[i]&mask {
			return false
		}
	}
	return true
}

// hideDigests returns acl with every digest id shown as "user:x", as getACL answers callers without
// ADMIN.
func hideDigests(acl []jute.ACL) []jute.ACL {
	out := cloneACL(acl)
	for i := range out {
		if out[i].ID.Scheme == "digest" {
			if u, _, ok := strings.Cut(out[i].ID.ID, ":"); ok {
				out[i].ID.ID = u + ":x"
			}
		}
	}
	return out
}

// validKerberosName mirrors ZooKeeper's KerberosName constructor, which SASLAuthenticationProvider
// uses to validate sasl ids: a name with '@' must be "service[/host]@realm" with no further '/'
// or '@'; a name without '@' is always valid.
func validKerberosName(id string) bool {
	at := strings.IndexByte(id, '@')
	if at < 0 {
		return true
	}
	head, realm := id[:at], id[at+1:]
	if strings.ContainsAny(realm, "/@") {
		return false
	}
	return strings.Count(head, "/") <= 1
}
