package znode

import "strings"

// x500Keywords are the attribute keywords Java's X500Principal accepts in a name, upper case.
var x500Keywords = map[string]bool{
	"CN": true, "C": true, "L": true, "S": true, "ST": true, "O": true, "OU": true, "T": true,
	"IP": true, "STREET": true, "DC": true, "DNQUALIFIER": true, "DNQ": true, "SURNAME": true,
	"GIVENNAME": true, "INITIALS": true, "GENERATION": true, "EMAIL": true, "EMAILADDRESS": true,
	"UID": true, "SERIALNUMBER": true,
}

// validX500Name reports whether id reads as an X.500 distinguished name, the check ZooKeeper's
// x509 provider makes of an ACL's id (it must parse as a javax.security.auth.x500.X500Principal):
// empty (not blank), or RDNs separated by "," or ";", each of attributes joined by "+", each a keyword or an
// OID, "=", and a value whose backslash escapes are well formed. It is a structural check, not a
// full RFC 2253 parser.
func validX500Name(id string) bool {
	if id == "" {
		return true
	}
	for _, ava := range splitUnescaped(id, ",;+") {
		kw, val, ok := strings.Cut(ava, "=")
		if !ok || !validX500Keyword(strings.TrimSpace(kw)) || !validX500Value(strings.TrimSpace(val)) {
			return false
		}
	}
	return true
}

// splitUnescaped splits s at the separators that are neither escaped nor inside quotes.
// A dangling backslash or an unclosed quote yields a part that fails validX500Value.
func splitUnescaped(s, seps string) []string {
	var parts []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && strings.IndexByte(seps, c) >= 0:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

func validX500Keyword(kw string) bool {
	if x500Keywords[strings.ToUpper(kw)] {
		return true
	}
	if len(kw) > 4 && strings.EqualFold(kw[:4], "OID.") {
		kw = kw[4:]
	}
	// A dotted OID: at least two arcs of digits.
	arcs := strings.Split(kw, ".")
	if len(arcs) < 2 {
		return false
	}
	for _, a := range arcs {
		if a == "" || strings.Trim(a, "0123456789") != "" {
			return false
		}
	}
	return true
}

func validX500Value(v string) bool {
	if strings.HasPrefix(v, "#") {
		h := v[1:]
		return len(h) > 0 && len(h)%2 == 0 && strings.Trim(h, "0123456789abcdefABCDEF") == ""
	}
	if strings.HasPrefix(v, `"`) {
		return len(v) >= 2 && strings.HasSuffix(v, `"`) && !strings.HasSuffix(v, `\"`)
	}
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '\\':
			if i+1 >= len(v) {
				return false
			}
			next := v[i+1]
			if strings.IndexByte(",=+<>#;\\\" \r\n", next) >= 0 {
				i++
				continue
			}
			if i+2 < len(v) && isHex(next) && isHex(v[i+2]) {
				i += 2
				continue
			}
			return false
		case '"', '<', '>':
			return false // must be escaped inside a value
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
