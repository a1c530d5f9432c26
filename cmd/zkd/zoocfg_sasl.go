package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/zkd-io/zkd/sasl"
	"github.com/zkd-io/zkd/server"
)

// saslSettings gathers the zoo.cfg keys of SASL on the client port. ZooKeeper reads most of them
// as JVM system properties (zookeeper.<key>), which its zoo.cfg parser sets from any key it does
// not know, so both spellings are accepted (parseZooCfg strips "zookeeper.").
type saslSettings struct {
	jaasFile                string // zkd.jaasConfig or java.security.auth.login.config
	section                 string // sasl.serverconfig; empty means Server
	saslProvider            bool   // authProvider.N=...SASLAuthenticationProvider
	requireSASL             bool   // sessionRequireClientSASLAuth
	enforce                 bool   // enforce.auth.enabled
	enforceSchemes          []string
	superUsers              []string
	superPassword           string
	removeHost, removeRealm bool
}

// The providers ZooKeeper ships that zkd has: digest and ip are always on; sasl is turned on
// by naming its provider, as in ZooKeeper.
const (
	saslProviderClass   = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
	digestProviderClass = "org.apache.zookeeper.server.auth.DigestAuthenticationProvider"
	ipProviderClass     = "org.apache.zookeeper.server.auth.IPAuthenticationProvider"
)

// isSASLKey reports whether k (a zoo.cfg key without its "zookeeper." prefix) is one of
// saslSettings'.
func isSASLKey(k string) bool {
	switch k {
	case "zkd.jaasConfig", "java.security.auth.login.config", "sasl.serverconfig",
		"sessionRequireClientSASLAuth", "enforce.auth.enabled", "enforce.auth.schemes",
		"kerberos.removeHostFromPrincipal", "kerberos.removeRealmFromPrincipal",
		"SASLAuthenticationProvider.superPassword", "superUser", "security.auth_to_local":
		return true
	}
	return strings.HasPrefix(k, "authProvider.") || strings.HasPrefix(k, "superUser.")
}

// strictBool reads a security switch: only true or false (any case). ZooKeeper would read any
// other value as false; zkd refuses it rather than guess which the operator meant.
func strictBool(key, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, keyError(key, v, errors.New("must be true or false"))
}

// set records one key; key is the key as written, k without its "zookeeper." prefix.
func (s *saslSettings) set(key, k, v string) error {
	var err error
	switch {
	case k == "zkd.jaasConfig" || k == "java.security.auth.login.config":
		if v == "" {
			return keyError(key, v, errors.New("names no file"))
		}
		s.jaasFile = v
	case k == "sasl.serverconfig":
		if v == "" {
			return keyError(key, v, errors.New("names no JAAS section"))
		}
		s.section = v
	case strings.HasPrefix(k, "authProvider."):
		switch v {
		case saslProviderClass:
			s.saslProvider = true
		case digestProviderClass, ipProviderClass:
			// Always on in zkd, as in ZooKeeper.
		default:
			return keyError(key, v, errors.New("zkd does not implement this authentication provider; refusing to start less secure than configured"))
		}
	case k == "sessionRequireClientSASLAuth":
		s.requireSASL, err = strictBool(key, v)
	case k == "enforce.auth.enabled":
		s.enforce, err = strictBool(key, v)
	case k == "enforce.auth.schemes":
		s.enforceSchemes = nil
		for _, sc := range strings.Split(v, ",") {
			if sc = strings.TrimSpace(sc); sc != "" {
				s.enforceSchemes = append(s.enforceSchemes, sc)
			}
		}
	case k == "kerberos.removeHostFromPrincipal":
		s.removeHost, err = strictBool(key, v)
	case k == "kerberos.removeRealmFromPrincipal":
		s.removeRealm, err = strictBool(key, v)
	case k == "SASLAuthenticationProvider.superPassword":
		s.superPassword = v
	case k == "security.auth_to_local":
		// Only the DEFAULT rule is implemented; other rules would name clients differently.
		if strings.TrimSpace(v) != "DEFAULT" {
			return keyError(key, v, errors.New("zkd implements only the DEFAULT rule; refusing to start with other names than configured"))
		}
	case k == "superUser" || strings.HasPrefix(k, "superUser."):
		if v != "" {
			s.superUsers = append(s.superUsers, v)
		}
	}
	return err
}

// apply fills cfg from the settings; jaasFlag (zkd's -jaas) overrides the file zoo.cfg names.
func (s *saslSettings) apply(cfg *server.Config, jaasFlag string) error {
	file := s.jaasFile
	if jaasFlag != "" {
		file = jaasFlag
	}
	section := s.section
	if section == "" {
		section = "Server"
	}
	if file != "" {
		j, err := sasl.ReadJAAS(file)
		if err != nil {
			return err
		}
		c, err := sasl.FromJAAS(j, section)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if err := c.CheckKerberos(); err != nil {
			return fmt.Errorf("%s: section %s: %w", file, section, err)
		}
		c.SuperPassword = s.superPassword
		c.RemoveHostFromPrincipal, c.RemoveRealmFromPrincipal = s.removeHost, s.removeRealm
		cfg.SASL = c
	} else if s.section != "" {
		return errors.New("zoo.cfg: sasl.serverconfig names a JAAS section but no JAAS file is configured (zkd.jaasConfig or -jaas)")
	}
	cfg.SASLACL = s.saslProvider
	cfg.SASLSuperUsers = slices.Clone(s.superUsers)
	switch {
	case s.requireSASL:
		// As in ZooKeeper, sessionRequireClientSASLAuth replaces the enforce.auth.* keys.
		cfg.EnforceAuthSchemes = []string{"sasl"}
	case s.enforce:
		if len(s.enforceSchemes) == 0 {
			return errors.New("zoo.cfg: enforce.auth.enabled is true but enforce.auth.schemes names no scheme")
		}
		cfg.EnforceAuthSchemes = slices.Clone(s.enforceSchemes)
	}
	for _, sc := range cfg.EnforceAuthSchemes {
		if sc == "sasl" && !s.saslProvider {
			return fmt.Errorf("zoo.cfg: authentication scheme sasl is enforced but not available: add authProvider.1=%s", saslProviderClass)
		}
	}
	return nil
}
