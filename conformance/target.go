package conformance

import (
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"time"
)

// Capabilities are the server-side switches a target has turned on. Checks that need a switch the
// target lacks skip with a reason.
type Capabilities struct {
	// TTL reports that TTL nodes are enabled (ZooKeeper's extendedTypesEnabled=true).
	TTL bool
	// Reconfig reports that dynamic reconfiguration is enabled (reconfigEnabled=true).
	Reconfig bool
	// SuperAuth is the "user:password" of a digest identity the server treats as super
	// (DigestAuthenticationProvider.superDigest); empty means none is known.
	SuperAuth string
	// AllFourLetterWords reports that every four-letter word is whitelisted
	// (4lw.commands.whitelist=*); without it only srvr is assumed.
	AllFourLetterWords bool
	// FastReap reports that the server reaps empty containers and expired TTL nodes within a few
	// seconds (ZooKeeper's znode.container.checkIntervalMs shortened from its 60 s default).
	FastReap bool
}

// Target is a server (or ensemble) the suite runs against.
type Target struct {
	// Name names the target in test names and in the compatibility matrix.
	Name string
	// Addrs are the client addresses (host:port), one per server.
	Addrs []string
	// Caps are the server-side switches that are on.
	Caps Capabilities
	// Version is the server's version as srvr reports it (for example "3.8.0"), or empty.
	Version string
	// Reference marks a real Apache ZooKeeper: the differential mode compares the other targets'
	// replies with its replies.
	Reference bool
}

// Standalone reports whether the target is a single server.
func (t *Target) Standalone() bool { return len(t.Addrs) == 1 }

// ParseCapabilities parses a comma-separated capability list: "ttl", "reconfig", "4lw" (all four
// letter words), "fastreap" (containers and TTL nodes reaped within seconds) and
// "super=user:password".
func ParseCapabilities(s string) (Capabilities, error) {
	var c Capabilities
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "":
		case f == "ttl":
			c.TTL = true
		case f == "reconfig":
			c.Reconfig = true
		case f == "4lw":
			c.AllFourLetterWords = true
		case f == "fastreap":
			c.FastReap = true
		case strings.HasPrefix(f, "super="):
			c.SuperAuth = strings.TrimPrefix(f, "super=")
		default:
			return c, fmt.Errorf("conformance: unknown capability %q", f)
		}
	}
	return c, nil
}

// ParseAddrs splits a CONFORMANCE_ADDR value (host:port[,host:port...]) and checks each address.
func ParseAddrs(s string) ([]string, error) {
	var addrs []string
	for a := range strings.SplitSeq(s, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("conformance: bad address %q: %w", a, err)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("conformance: no address in %q", s)
	}
	return addrs, nil
}

// FourLetterWord sends a four-letter word to addr and returns everything the server writes before
// it closes the connection.
func FourLetterWord(addr, word string, timeout time.Duration) (string, error) {
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", fmt.Errorf("conformance: dial %s: %w", addr, err)
	}
	defer nc.Close()
	if err := nc.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", fmt.Errorf("conformance: set deadline: %w", err)
	}
	if _, err := io.WriteString(nc, word); err != nil {
		return "", fmt.Errorf("conformance: write %s: %w", word, err)
	}
	b, err := io.ReadAll(nc)
	if err != nil && closedOrStillOpen(err) != nil {
		return string(b), fmt.Errorf("conformance: read %s reply: %w", word, err)
	}
	return string(b), nil
}

var versionRE = regexp.MustCompile(`(?m)^Zookeeper version: (\d+\.\d+\.\d+)`)

// ServerVersion asks addr for srvr and returns the version number it reports, or "" if it
// reports none.
func ServerVersion(addr string, timeout time.Duration) string {
	out, err := FourLetterWord(addr, "srvr", timeout)
	if err != nil {
		return ""
	}
	m := versionRE.FindStringSubmatch(out)
	if m == nil {
		return ""
	}
	return m[1]
}
