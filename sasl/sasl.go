package sasl

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Exchange is the server side of one client's SASL authentication. Next takes the client's
// token (the GetSASLRequest's) and returns the token to answer with (the SetSASLResponse's);
// done reports that the client is authenticated, after which ID is its authorization id. An
// error ends the exchange: the client failed to authenticate (errors.Is(err, ErrAuthFailed)).
type Exchange interface {
	Next(token []byte) (reply []byte, done bool, err error)
	ID() string
	Mechanism() string
}

// Config is how a server authenticates SASL clients: DIGEST-MD5 with Users, or GSSAPI when
// Kerberos is set. A Config in use must not be copied (it keeps the loaded keytab).
type Config struct {
	// Users holds the DIGEST-MD5 passwords by user name (the JAAS section's user_NAME options).
	Users map[string]string
	// SuperPassword, when set, is the DIGEST-MD5 password of the user "super", in place of any
	// user_super option (ZooKeeper's zookeeper.SASLAuthenticationProvider.superPassword).
	SuperPassword string
	// Kerberos, when set, makes the server offer GSSAPI instead of DIGEST-MD5.
	Kerberos *Kerberos
	// RemoveHostFromPrincipal and RemoveRealmFromPrincipal drop the host and the realm from
	// the authenticated name (kerberos.removeHostFromPrincipal, kerberos.removeRealmFromPrincipal).
	RemoveHostFromPrincipal  bool
	RemoveRealmFromPrincipal bool
	// DefaultRealm is the Kerberos default realm: a name in it keeps only its first component
	// (before host and realm are added back), by ZooKeeper's DEFAULT auth_to_local rule. Empty
	// means the realm of Kerberos.Principal, or none.
	DefaultRealm string

	kt      keytabCache // Kerberos' keytab, loaded once
	replays replayCache // Kerberos authenticators already accepted
}

// Kerberos is the server's own identity for GSSAPI: its service principal
// ("zookeeper/host@REALM") and the keytab holding that principal's keys.
type Kerberos struct {
	Principal string
	KeyTab    string
}

// Mechanism is the mechanism c offers: "GSSAPI" or "DIGEST-MD5".
func (c *Config) Mechanism() string {
	if c.Kerberos != nil {
		return "GSSAPI"
	}
	return "DIGEST-MD5"
}

// NewExchange starts one client's authentication.
func (c *Config) NewExchange() (Exchange, error) {
	if c.Kerberos != nil {
		return newGSSExchange(c)
	}
	return newDigestExchange(c)
}

func (c *Config) password(user string) (string, bool) {
	if user == "super" && c.SuperPassword != "" {
		return c.SuperPassword, true
	}
	p, ok := c.Users[user]
	return p, ok
}

// FromJAAS builds a Config from a JAAS section, as ZooKeeper's server reads its Server section:
// every user_NAME option of every module is a DIGEST-MD5 user; a Krb5LoginModule with a
// principal (and keyTab) makes the server a Kerberos service and selects GSSAPI.
func FromJAAS(j JAAS, section string) (*Config, error) {
	mods, ok := j[section]
	if !ok {
		names := make([]string, 0, len(j))
		for n := range j {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("%w: %q (the file has %s)", errNoSection, section, strings.Join(names, ", "))
	}
	c := &Config{Users: map[string]string{}}
	for _, m := range mods {
		for k, v := range m.Options {
			if name, ok := strings.CutPrefix(k, "user_"); ok {
				c.Users[name] = v
			}
		}
		if strings.HasSuffix(m.Class, ".Krb5LoginModule") {
			p := m.Options["principal"]
			if p == "" {
				return nil, fmt.Errorf("sasl: section %q: %s has no principal option", section, m.Class)
			}
			if !strings.EqualFold(m.Options["useKeyTab"], "true") || m.Options["keyTab"] == "" {
				return nil, fmt.Errorf("sasl: section %q: %s needs useKeyTab=true and a keyTab (zkd logs in from a keytab only)", section, m.Class)
			}
			c.Kerberos = &Kerberos{Principal: p, KeyTab: m.Options["keyTab"]}
		}
	}
	if c.Kerberos == nil && len(c.Users) == 0 {
		return nil, fmt.Errorf("sasl: section %q has neither user_NAME options (DIGEST-MD5) nor a Krb5LoginModule (GSSAPI)", section)
	}
	return c, nil
}

// kerberosName matches "service[/host]@realm", as ZooKeeper's KerberosName parses a name.
var kerberosName = regexp.MustCompile(`^([^/@]*)(/([^/@]*))?@([^/@]*)$`)

// canonical turns an authenticated name into the id ZooKeeper grants it
// (SaslServerCallbackHandler): the name's short form by the DEFAULT rule (the first component
// when the realm is the default realm), then "/host" unless RemoveHostFromPrincipal and
// "@realm" unless RemoveRealmFromPrincipal. A name in another realm has no short form; as in
// ZooKeeper it is then kept whole. A name with '@' that is not a Kerberos name is refused.
func (c *Config) canonical(name string) (string, error) {
	m := kerberosName.FindStringSubmatchIndex(name)
	if m == nil {
		if strings.Contains(name, "@") {
			return "", fmt.Errorf("malformed Kerberos name %q", name)
		}
		return name, nil
	}
	service := name[m[2]:m[3]]
	hasHost := m[6] >= 0
	host := ""
	if hasHost {
		host = name[m[6]:m[7]]
	}
	realm := name[m[8]:m[9]]
	if realm != c.defaultRealm() {
		return name, nil // no rule applies: ZooKeeper keeps the name as it was given
	}
	id := service
	if hasHost && !c.RemoveHostFromPrincipal {
		id += "/" + host
	}
	if !c.RemoveRealmFromPrincipal {
		id += "@" + realm
	}
	return id, nil
}

func (c *Config) defaultRealm() string {
	if c.DefaultRealm != "" {
		return c.DefaultRealm
	}
	if c.Kerberos != nil {
		if _, r, ok := strings.Cut(c.Kerberos.Principal, "@"); ok {
			return r
		}
	}
	return ""
}
