package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/zkd-io/zkd/internal/tlsconf"
	"github.com/zkd-io/zkd/server"
)

// x509ProviderClass is ZooKeeper's x509 authentication provider, the one zkd implements for TLS
// clients (authProvider.N=... names it; zkd always has it).
const x509ProviderClass = "org.apache.zookeeper.server.auth.X509AuthenticationProvider"

// clientTLS collects a zoo.cfg's keys for TLS on the client port: secureClientPort and
// secureClientPortAddress, client.portUnification, the ssl.* keys (not ssl.quorum.*), the x509
// provider's keys and serverCnxnFactory. finishClientTLS turns them into the server's TLS
// settings once every key is read.
type clientTLS struct {
	ssl             map[string]string // ssl.* keys as written, for tlsconf.Parse
	securePort      string
	secureAddr      string
	portUnification bool
	superUser       string
	// source serves the certificates and reloads them when their files change; the binary
	// closes it after the server stops. Nil without client TLS.
	source *tlsconf.Source
}

// isClientTLSKey reports whether k (without the zookeeper. prefix) is one of clientTLS's keys.
// An authProvider.N key is one only when it names the x509 provider.
func isClientTLSKey(k, v string) bool {
	switch k {
	case "secureClientPort", "secureClientPortAddress", "client.portUnification", "client.certReload",
		"serverCnxnFactory", "X509AuthenticationProvider.superUser":
		return true
	}
	if strings.HasPrefix(k, "authProvider.") {
		return v == x509ProviderClass
	}
	return strings.HasPrefix(k, "ssl.") && !strings.HasPrefix(k, "ssl.quorum.")
}

// set records one key. key is the key as written, k without the zookeeper. prefix.
func (c *clientTLS) set(key, k, v string) error {
	switch {
	case k == "secureClientPort":
		if _, err := nonNegativeInt(key, v); err != nil {
			return err
		}
		c.securePort = v
	case k == "secureClientPortAddress":
		c.secureAddr = v
	case k == "client.portUnification":
		on, err := boolValue(key, v)
		if err != nil {
			return err
		}
		c.portUnification = on
	case k == "client.certReload":
		// zkd always reloads changed certificates (at most once a second, on a handshake).
		if _, err := boolValue(key, v); err != nil {
			return err
		}
	case k == "serverCnxnFactory":
		// ZooKeeper needs its Netty factory for TLS; zkd has one connection layer for both.
		switch v {
		case "org.apache.zookeeper.server.NettyServerCnxnFactory", "org.apache.zookeeper.server.NIOServerCnxnFactory", "":
		default:
			return keyError(key, v, errors.New("zkd cannot load Java classes; remove the key"))
		}
	case k == "X509AuthenticationProvider.superUser":
		c.superUser = v
	case strings.HasPrefix(k, "authProvider."):
		// The x509 provider: zkd always has it.
	case !securityKeys[k] && offValues[strings.ToLower(v)]:
		// A setting zkd lacks (crl, ocsp, a context supplier), switched off: nothing to do.
	default:
		if c.ssl == nil {
			c.ssl = make(map[string]string)
		}
		c.ssl[k] = v
	}
	return nil
}

// finishClientTLS applies the client TLS keys to st.cfg after the whole zoo.cfg is read;
// clientPort (empty when not set) says whether there is a plain listener.
func (st *settings) finishClientTLS(clientPort string, log *slog.Logger) error {
	c := &st.clientTLS
	set, err := tlsconf.Parse(c.ssl, "ssl.")
	if err != nil {
		return fmt.Errorf("zoo.cfg: %w", err)
	}
	if p := set.AuthProvider; p != "" && p != "x509" {
		return keyError("ssl.authProvider", p, errors.New("zkd authenticates TLS clients with the x509 provider only"))
	}
	cfg := &st.cfg
	cfg.X509SuperUser = c.superUser
	secure := c.securePort != "" && c.securePort != "0"
	if !secure && !c.portUnification {
		if len(c.ssl) > 0 {
			log.Info("ssl.* keys set without secureClientPort or client.portUnification: no client port uses TLS")
		}
		return nil
	}
	if set.KeyStore.Location == "" {
		return errors.New("zoo.cfg: ssl.keyStore.location is required for secureClientPort or client.portUnification")
	}
	src, err := tlsconf.New(set, log)
	if err != nil {
		return fmt.Errorf("zoo.cfg: %w", err)
	}
	c.source = src
	cfg.TLS = src.ServerConfig()
	cfg.PortUnification = c.portUnification
	if secure {
		cfg.SecureAddr = net.JoinHostPort(c.secureAddr, c.securePort)
	}
	if clientPort == "" {
		if c.portUnification {
			return errors.New("zoo.cfg: client.portUnification needs clientPort")
		}
		cfg.NoPlainListener = true
		cfg.Addr = ""
	}
	return nil
}

// clientTLSMode says, for the startup log, what the plain client port speaks.
func clientTLSMode(cfg server.Config) string {
	switch {
	case cfg.NoPlainListener:
		return "no plain port"
	case cfg.PortUnification:
		return "plain and TLS (portUnification)"
	}
	return "plain only"
}
