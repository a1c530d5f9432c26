package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/zkd-io/zkd/consensus"
	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/sasl"
)

// Peer is one voting member of a cluster, as a zoo.cfg server.N line describes it.
type Peer struct {
	// ID is the member's myid (server.N). It must be unique within the cluster and above zero.
	ID int64
	// PeerAddr is the host:port the member's peer listener accepts Raft and cluster traffic on.
	PeerAddr string
	// ClientAddr is the member's client address (host:port), shown in conf and admin output.
	// Empty means unknown.
	ClientAddr string
	// ElectionPort is the election port a zoo.cfg server.N line names. zkd elects over the peer
	// port and only shows this one in the dynamic configuration (/zookeeper/config, the config
	// four-letter word), as ZooKeeper would. Zero means the peer port.
	ElectionPort int
}

// Config configures a Server. Every field has a usable zero value, which each comment describes;
// Start applies the defaults and then Validate.
type Config struct {
	// Addr is the client address to listen on when Listener is nil. Empty means "127.0.0.1:0",
	// a free loopback port (zoo.cfg's clientPort and clientPortAddress map here).
	Addr string
	// Listener is the client listener, already bound. Nil means net.Listen("tcp", Addr).
	Listener net.Listener
	// NoPlainListener serves clients on the secure listener only (a zoo.cfg with
	// secureClientPort and no clientPort). Addr and Listener must then be unset.
	NoPlainListener bool

	// TLS is the server side of TLS for clients. The secure listener serves it, and so does the
	// plain one with PortUnification. Nil means no TLS: SecureAddr, SecureListener and
	// PortUnification must be unset. The zkd binary builds it from zoo.cfg's ssl.* keys with
	// internal/tlsconf, which also reloads changed certificates.
	TLS *tls.Config
	// SecureAddr is the TLS-only client address to listen on when SecureListener is nil
	// (secureClientPortAddress and secureClientPort). Empty means no secure listener.
	SecureAddr string
	// SecureListener is the TLS-only client listener, already bound, carrying plain TCP: the
	// server runs the handshake. Nil means listen on SecureAddr.
	SecureListener net.Listener
	// PortUnification makes the plain listener serve TLS too (client.portUnification): a
	// connection whose first byte opens a TLS handshake record is served over TLS.
	PortUnification bool
	// X509SuperUser is X509AuthenticationProvider.superUser: a client whose verified certificate
	// has this subject (its x509 id, the DN as Java prints it) is also super, which passes every
	// ACL check. Empty means none.
	X509SuperUser string

	// Dir is the data directory. Empty means in-memory storage: nothing survives Shutdown.
	// The zkd binary always sets it.
	Dir string

	// ServerID is this server's myid. Zero means 1 when Peers is empty (standalone) and is
	// invalid otherwise.
	ServerID int64
	// Peers lists every voting member, this server included, to bootstrap a new cluster.
	// Empty means standalone: a one-voter cluster.
	Peers []Peer
	// Join starts a server with no data as a member-to-be: it bootstraps nothing and waits until
	// the cluster adds it (a reconfig naming it among the joining servers). Peers must still
	// list it. False means a new cluster bootstraps from Peers.
	Join bool
	// PeerAddr is the peer address to listen on when PeerListener is nil. Empty means this
	// server's entry in Peers, or "127.0.0.1:0" when standalone.
	PeerAddr string
	// PeerListener is the peer listener, already bound. Nil means listen on PeerAddr.
	PeerListener net.Listener
	// PeerTLS puts the peer port (Raft and the cluster RPC) under mutual TLS: zoo.cfg's
	// sslQuorum, portUnification and ssl.quorum.* map here. Only peers whose certificate the
	// trust store accepts (and, with hostname verification, that come from and name a member's
	// host) are let in; see consensus.PeerTLS and docs/security.md. Nil means plaintext.
	PeerTLS *consensus.PeerTLS

	// TickTime is ZooKeeper's tickTime, the unit of session timeouts. Zero means 2s.
	TickTime time.Duration
	// MinSessionTimeout is the smallest timeout a session may negotiate. Zero means 2×TickTime.
	MinSessionTimeout time.Duration
	// MaxSessionTimeout is the largest timeout a session may negotiate. Zero means 20×TickTime.
	MaxSessionTimeout time.Duration

	// MaxClientConns limits the client connections from one IP address (maxClientCnxns).
	// Zero means 60; negative means unlimited.
	MaxClientConns int
	// MaxConns limits the client connections in total (maxCnxns). Zero or negative means no limit
	// beyond the file descriptors': whatever it says, the server holds no more client connections
	// than its file descriptor limit (RLIMIT_NOFILE) allows after keeping a twentieth of it (at
	// least 256, at most 4096) for storage, peers and the admin server, so that a connection storm
	// cannot leave it unable to write its log.
	MaxConns int
	// ClientTCPKeepAlive turns on TCP keep-alive for the client connections the server accepts
	// (clientTcpKeepAlive). Off by default, as in ZooKeeper: sessions have their own pings and
	// timeouts. Listener and SecureListener, when given, keep their own settings.
	ClientTCPKeepAlive bool
	// MaxFrameSize is the largest request frame accepted (jute.maxbuffer); a larger one closes
	// the connection. Zero means 0xfffff.
	MaxFrameSize int
	// MaxInFlight is how many requests one connection may have received and not yet answered;
	// beyond it the server stops reading that connection (TCP pushes back on the client).
	// Zero means 1000.
	MaxInFlight int
	// GlobalOutstandingLimit is ZooKeeper's globalOutstandingLimit: once more requests than this
	// are in process server-wide (or waiting for the request throttler), a connection that has a
	// request of its own unanswered is not read until it has none or the server is back under the
	// limit. Nothing is refused: TCP pushes back on the clients. Zero means 1000; negative means
	// no limit.
	GlobalOutstandingLimit int
	// RequestThrottleMaxRequests is zookeeper.request_throttle_max_requests: at most this many
	// requests in process server-wide; the reader of a connection whose next request finds none
	// free waits, up to RequestThrottleStallTime at a time, until one is (request_throttle_wait_count
	// counts each wait). Zero means no request throttling, as in ZooKeeper.
	RequestThrottleMaxRequests int
	// RequestThrottleStallTime is zookeeper.request_throttle_stall_time: the longest a throttled
	// reader waits before it looks again (it is woken sooner when a request finishes). Zero means
	// 100ms.
	RequestThrottleStallTime time.Duration
	// RequestThrottleKeepStale turns off zookeeper.request_throttle_drop_stale (on by default, as
	// in ZooKeeper): with it off, a request the throttler held while its connection closed is
	// still handled; with it on, it is dropped unanswered, never proposed, and counted in
	// stale_requests_dropped. A write already proposed is never dropped.
	RequestThrottleKeepStale bool

	// ConnThrottleTokens is zookeeper.connection_throttle_tokens: the size of the token bucket a
	// connection draws from when it asks for a session; with the bucket empty the connection is
	// closed unanswered, as ZooKeeper closes it, and counted in connection_rejected. Zero means no
	// connection throttling, as in ZooKeeper.
	ConnThrottleTokens int
	// ConnThrottleFillTime is zookeeper.connection_throttle_fill_time: every this long the bucket
	// gets ConnThrottleFillCount tokens back (in whole milliseconds). Zero means 1ms.
	ConnThrottleFillTime time.Duration
	// ConnThrottleFillCount is zookeeper.connection_throttle_fill_count. Zero means 1.
	ConnThrottleFillCount int
	// ConnThrottleFreezeTime is zookeeper.connection_throttle_freeze_time: with it positive, a
	// connection is also refused at random with a probability (connection_drop_probability) that
	// is raised by ConnThrottleDropIncrease for each such period the bucket is found empty, and
	// lowered by ConnThrottleDropDecrease for each period it is found with a deficit of at most
	// ConnThrottleDecreaseRatio of the bucket. Times are whole milliseconds, as in ZooKeeper, so
	// ZooKeeper's 0 (adjust at every connection) is any positive value under a millisecond. Zero
	// means off (ZooKeeper's -1, its default).
	ConnThrottleFreezeTime time.Duration
	// ConnThrottleDropIncrease is zookeeper.connection_throttle_drop_increase. Zero means 0.02.
	ConnThrottleDropIncrease float64
	// ConnThrottleDropDecrease is zookeeper.connection_throttle_drop_decrease. Zero means 0.002.
	ConnThrottleDropDecrease float64
	// ConnThrottleDecreaseRatio is zookeeper.connection_throttle_decrease_ratio, from 0 to 1.
	// Zero is ZooKeeper's default: the probability falls only when the bucket is full.
	ConnThrottleDecreaseRatio float64
	// ConnThrottleWeightEnabled is zookeeper.connection_throttle_weight_enabled: a new session
	// draws ConnThrottleGlobalSessionWeight tokens and a reconnecting one
	// ConnThrottleRenewSessionWeight, and ConnThrottleTokens and ConnThrottleFillCount count new
	// sessions (the bucket holds the global weight times as many tokens). False means every
	// connection draws one token.
	ConnThrottleWeightEnabled bool
	// ConnThrottleGlobalSessionWeight is zookeeper.connection_throttle_global_session_weight.
	// Zero means 3. As in ZooKeeper, a weight below the local one is raised to it.
	ConnThrottleGlobalSessionWeight int
	// ConnThrottleLocalSessionWeight is zookeeper.connection_throttle_local_session_weight. zkd
	// has no local sessions, so it only bounds the other two from below. Zero means 1.
	ConnThrottleLocalSessionWeight int
	// ConnThrottleRenewSessionWeight is zookeeper.connection_throttle_renew_session_weight.
	// Zero means 2. As in ZooKeeper, a weight below the local one is raised to it.
	ConnThrottleRenewSessionWeight int

	// LargeRequestThreshold is zookeeper.largeRequestThreshold: a request frame longer than this
	// many bytes is a large request, and the large requests in process together may hold at
	// most LargeRequestMaxBytes; one that would go over closes its connection unanswered, counted
	// in large_requests_rejected, as in ZooKeeper. Zero means no large-request limit (ZooKeeper's
	// -1, its default).
	LargeRequestThreshold int
	// LargeRequestMaxBytes is zookeeper.largeRequestMaxBytes. Zero means ZooKeeper's 100 MiB.
	LargeRequestMaxBytes int

	// MaxOutboundBytes is how many reply and notification bytes may wait for one slow client
	// before it is disconnected. Zero means 32 MiB.
	MaxOutboundBytes int
	// MaxTotalOutboundBytes bounds the reply and notification bytes waiting for all clients
	// together. Beyond it, a connection with anything queued is not read until its queue
	// drains, and a client holding more than 4 MiB unread (or twice MaxFrameSize) is
	// disconnected as a slow consumer. Zero means 512 MiB; negative, no bound.
	MaxTotalOutboundBytes int64
	// SessionlessTimeout is how long a new connection may take to send its ConnectRequest.
	// Zero means 10s.
	SessionlessTimeout time.Duration

	// FourLetterWords lists the four-letter words served on the client port
	// (4lw.commands.whitelist); "*" enables all, and words zkd does not know are ignored. Nil means
	// DefaultFourLetterWords(). srvr is always enabled, as in ZooKeeper.
	FourLetterWords []string
	// AdminAddr is the admin HTTP address (/metrics, /ready, /commands/<name>).
	// Empty means no admin server.
	AdminAddr string
	// AdminListener is the admin listener, already bound; it overrides AdminAddr.
	AdminListener net.Listener
	// AdminCommandURL is the prefix of admin commands. Empty means "/commands".
	AdminCommandURL string
	// AdminSnapshotDisabled turns the snapshot admin command off (admin.snapshot.enabled=false).
	AdminSnapshotDisabled bool
	// AdminSnapshotInterval is the least time between two snapshot commands
	// (admin.snapshot.intervalInMS). Zero means ZooKeeper's 5 minutes; negative, no limit.
	AdminSnapshotInterval time.Duration
	// EnablePprof serves net/http/pprof under /debug/pprof/ on the admin server.
	EnablePprof bool
	// InitialConfig is the text of the configuration file the server was started from, as the
	// initial_configuration admin command shows it. Empty means none (an embedded server).
	InitialConfig string

	// SlowRequestThreshold logs, at WARN, every request that takes longer than this from
	// arrival to its reply leaving for the socket, with where the time went (zoo.cfg's
	// zkd.slowRequestThresholdMs). The log is rate-limited. Zero means 1s; negative turns it off.
	SlowRequestThreshold time.Duration
	// HerdWatchThreshold is how many of this server's sessions must watch one node (or one
	// node's children) for the lock report (the locks admin command, lcks) to list it as a
	// herd risk (zoo.cfg's zkd.herdWatchThreshold). Zero means 10.
	HerdWatchThreshold int

	// ExtendedTypesEnabled allows TTL nodes (zookeeper.extendedTypesEnabled). False means a
	// createTTL is answered Unimplemented, as ZooKeeper does by default.
	ExtendedTypesEnabled bool
	// ReconfigEnabled allows the reconfig operation. False means it is answered ReconfigDisabled.
	ReconfigEnabled bool
	// SuperDigest is DigestAuthenticationProvider.superDigest, "super:<base64 sha1>": a digest
	// auth whose id equals it also gets the super identity, which passes every ACL check.
	// Empty means no super user.
	SuperDigest string

	// SASL authenticates clients over SASL (op 102) with DIGEST-MD5 or GSSAPI; a client that
	// completes it gets the identity sasl:<id>. Nil means SASL is off: a sasl request is
	// answered AuthFailed and its connection closes. Start does not read a Kerberos keytab;
	// sasl.Config.CheckKerberos checks it beforehand (the zkd binary does).
	SASL *sasl.Config
	// SASLACL accepts the sasl scheme in ACLs, as zoo.cfg's
	// authProvider.N=org.apache.zookeeper.server.auth.SASLAuthenticationProvider does in
	// ZooKeeper. False means a sasl ACL entry is InvalidACL.
	SASLACL bool
	// SASLSuperUsers are the sasl ids that also get the super identity, which passes every ACL
	// check (zookeeper.superUser). Empty means none.
	SASLSuperUsers []string
	// EnforceAuthSchemes, when not empty, refuses every request but auth and sasl from a
	// connection that has no identity of one of these schemes: the request is answered
	// SessionClosedRequireSASLAuth (-124) and the connection closes, as ZooKeeper's
	// enforce.auth.enabled with enforce.auth.schemes (and sessionRequireClientSASLAuth, which
	// means the scheme sasl) do. The schemes must be ip, digest, or sasl with SASLACL set.
	EnforceAuthSchemes []string

	// Logger receives the server's logs. Nil means slog.New(slog.DiscardHandler).
	Logger *slog.Logger

	// Consensus holds the Raft tunables (timeouts, snapshot cadence, reaping). The server sets
	// its ID, Dir, Peers, listener, TLS (from PeerTLS), logger, TickTime and callbacks; every
	// other zero value means that package's default.
	Consensus consensus.Config
}

// DefaultFourLetterWords returns the four-letter words enabled when Config.FourLetterWords is
// nil: every command that only reads, so monitoring works out of the box (ZooKeeper's own default
// of srvr alone breaks most monitoring tools). crst and srst, which reset counters, stmk, which
// sets the trace mask, and hash, which reads the whole tree, are left out.
func DefaultFourLetterWords() []string {
	return []string{"ruok", "srvr", "stat", "mntr", "conf", "cons", "envi", "wchs", "wchc", "wchp", "dump", "dirs", "isro", "lcks"}
}

// allFourLetterWords is every four-letter word the server knows.
var allFourLetterWords = []string{
	"ruok", "srvr", "stat", "mntr", "conf", "cons", "crst", "srst", "envi", "wchs", "wchc", "wchp",
	"dump", "dirs", "isro", "gtmk", "stmk", "lcks", "hash",
}

func (c Config) withDefaults() Config {
	if c.Addr == "" && c.Listener == nil && !c.NoPlainListener {
		c.Addr = "127.0.0.1:0"
	}
	if c.AdminSnapshotInterval == 0 {
		c.AdminSnapshotInterval = 5 * time.Minute
	}
	if c.ServerID == 0 && len(c.Peers) == 0 {
		c.ServerID = 1
	}
	if c.TickTime == 0 {
		c.TickTime = 2 * time.Second
	}
	if c.MinSessionTimeout == 0 {
		c.MinSessionTimeout = 2 * c.TickTime
	}
	if c.MaxSessionTimeout == 0 {
		c.MaxSessionTimeout = 20 * c.TickTime
	}
	if c.MaxClientConns == 0 {
		c.MaxClientConns = 60
	}
	if c.MaxFrameSize == 0 {
		c.MaxFrameSize = jute.DefaultMaxBuffer
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 1000
	}
	if c.MaxOutboundBytes == 0 {
		c.MaxOutboundBytes = 32 << 20
	}
	if c.MaxTotalOutboundBytes == 0 {
		c.MaxTotalOutboundBytes = 512 << 20
	}
	if c.LargeRequestMaxBytes == 0 {
		c.LargeRequestMaxBytes = 100 << 20
	}
	if c.GlobalOutstandingLimit == 0 {
		c.GlobalOutstandingLimit = 1000
	}
	if c.RequestThrottleStallTime == 0 {
		c.RequestThrottleStallTime = 100 * time.Millisecond
	}
	if c.ConnThrottleFillTime == 0 {
		c.ConnThrottleFillTime = time.Millisecond
	}
	if c.ConnThrottleFillCount == 0 {
		c.ConnThrottleFillCount = 1
	}
	if c.ConnThrottleDropIncrease == 0 {
		c.ConnThrottleDropIncrease = 0.02
	}
	if c.ConnThrottleDropDecrease == 0 {
		c.ConnThrottleDropDecrease = 0.002
	}
	if c.ConnThrottleGlobalSessionWeight == 0 {
		c.ConnThrottleGlobalSessionWeight = 3
	}
	if c.ConnThrottleLocalSessionWeight == 0 {
		c.ConnThrottleLocalSessionWeight = 1
	}
	if c.ConnThrottleRenewSessionWeight == 0 {
		c.ConnThrottleRenewSessionWeight = 2
	}
	if c.SessionlessTimeout == 0 {
		c.SessionlessTimeout = 10 * time.Second
	}
	if c.FourLetterWords == nil {
		c.FourLetterWords = DefaultFourLetterWords()
	}
	if c.AdminCommandURL == "" {
		c.AdminCommandURL = "/commands"
	}
	if c.SlowRequestThreshold == 0 {
		c.SlowRequestThreshold = time.Second
	}
	if c.HerdWatchThreshold == 0 {
		c.HerdWatchThreshold = 10
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports the first problem with c, after the defaults are applied as Start applies them.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.TickTime < time.Millisecond:
		return errors.New("server: config: TickTime must be at least 1ms")
	case c.MinSessionTimeout <= 0 || c.MaxSessionTimeout <= 0:
		return errors.New("server: config: session timeouts must be positive")
	case c.MinSessionTimeout > c.MaxSessionTimeout:
		return fmt.Errorf("server: config: MinSessionTimeout %v is above MaxSessionTimeout %v",
			c.MinSessionTimeout, c.MaxSessionTimeout)
	case c.MaxSessionTimeout > time.Duration(1<<31-1)*time.Millisecond:
		return errors.New("server: config: MaxSessionTimeout does not fit in an int32 of milliseconds")
	case c.MaxFrameSize < 1024:
		return errors.New("server: config: MaxFrameSize must be at least 1024")
	case c.MaxOutboundBytes < c.MaxFrameSize:
		return errors.New("server: config: MaxOutboundBytes must be at least MaxFrameSize")
	case c.MaxTotalOutboundBytes > 0 && c.MaxTotalOutboundBytes < int64(c.MaxOutboundBytes):
		return errors.New("server: config: MaxTotalOutboundBytes must be at least MaxOutboundBytes")
	case c.MaxInFlight < 1:
		return errors.New("server: config: MaxInFlight must be positive")
	case c.LargeRequestThreshold < 0 || c.LargeRequestMaxBytes < 0:
		return errors.New("server: config: negative LargeRequestThreshold or LargeRequestMaxBytes")
	case c.RequestThrottleMaxRequests < 0:
		return errors.New("server: config: negative RequestThrottleMaxRequests")
	case c.RequestThrottleStallTime < 0:
		return errors.New("server: config: negative RequestThrottleStallTime")
	case c.ConnThrottleTokens < 0 || c.ConnThrottleFillCount < 0:
		return errors.New("server: config: negative ConnThrottleTokens or ConnThrottleFillCount")
	case c.ConnThrottleFillTime < 0 || c.ConnThrottleFreezeTime < 0:
		return errors.New("server: config: negative ConnThrottleFillTime or ConnThrottleFreezeTime")
	case c.ConnThrottleDropIncrease < 0 || c.ConnThrottleDropDecrease < 0 ||
		c.ConnThrottleDecreaseRatio < 0 || c.ConnThrottleDecreaseRatio > 1:
		return errors.New("server: config: ConnThrottleDropIncrease and ConnThrottleDropDecrease must not be negative, ConnThrottleDecreaseRatio must be within [0, 1]")
	case c.ConnThrottleGlobalSessionWeight < 0 || c.ConnThrottleLocalSessionWeight < 0 || c.ConnThrottleRenewSessionWeight < 0:
		return errors.New("server: config: negative connection throttle weight")
	case c.SessionlessTimeout < 0:
		return errors.New("server: config: negative SessionlessTimeout")
	case c.ServerID < 0:
		return errors.New("server: config: negative ServerID")
	case c.HerdWatchThreshold < 0:
		return errors.New("server: config: negative HerdWatchThreshold")
	}
	if err := c.validateTLS(); err != nil {
		return err
	}
	if c.SuperDigest != "" && !strings.HasPrefix(c.SuperDigest, "super:") {
		return errors.New(`server: config: SuperDigest must look like "super:<base64 sha1>"`)
	}
	for _, s := range c.EnforceAuthSchemes {
		switch {
		case s == "ip" || s == "digest":
		case s == "sasl" && c.SASLACL:
		case s == "x509" && c.TLS != nil:
		default:
			// ZooKeeper refuses to start the same way: the scheme has no provider.
			return fmt.Errorf("server: config: enforced authentication scheme %q is not available", s)
		}
	}
	if c.PeerTLS != nil {
		if err := c.PeerTLS.Validate(); err != nil {
			return fmt.Errorf("server: config: PeerTLS: %w", err)
		}
	}
	if len(c.Peers) > 0 {
		if c.ServerID <= 0 {
			return errors.New("server: config: ServerID is required with Peers")
		}
		seen := map[int64]bool{}
		self := false
		for _, p := range c.Peers {
			if p.ID <= 0 || p.PeerAddr == "" {
				return errors.New("server: config: every peer needs an ID above zero and a PeerAddr")
			}
			if seen[p.ID] {
				return fmt.Errorf("server: config: duplicate peer id %d", p.ID)
			}
			seen[p.ID] = true
			self = self || p.ID == c.ServerID
		}
		if !self {
			return fmt.Errorf("server: config: Peers does not contain ServerID %d", c.ServerID)
		}
	}
	return nil
}

// validateTLS checks the TLS fields against each other.
func (c Config) validateTLS() error {
	secure := c.SecureAddr != "" || c.SecureListener != nil
	switch {
	case c.TLS == nil && (secure || c.PortUnification):
		return errors.New("server: config: SecureAddr, SecureListener and PortUnification need TLS")
	case c.NoPlainListener && (c.Addr != "" || c.Listener != nil):
		return errors.New("server: config: NoPlainListener with Addr or Listener")
	case c.NoPlainListener && !secure:
		return errors.New("server: config: NoPlainListener needs a secure listener")
	case c.NoPlainListener && c.PortUnification:
		return errors.New("server: config: PortUnification needs the plain listener")
	}
	return nil
}

func knownWord(w string) bool {
	for _, k := range allFourLetterWords {
		if k == w {
			return true
		}
	}
	return false
}

// minTimeoutMs and maxTimeoutMs are the negotiation bounds in milliseconds.
func (c Config) minTimeoutMs() int32 { return int32(c.MinSessionTimeout / time.Millisecond) }
func (c Config) maxTimeoutMs() int32 { return int32(c.MaxSessionTimeout / time.Millisecond) }

// negotiate clamps a requested session timeout to [min, max], as ZooKeeper does.
func (c Config) negotiate(req int32) int32 {
	if lo := c.minTimeoutMs(); req < lo {
		return lo
	}
	if hi := c.maxTimeoutMs(); req > hi {
		return hi
	}
	return req
}

// throttleWeights are the tokens each kind of session draws from the connection throttle when
// weighing is on.
type throttleWeights struct{ global, local, renew int }

// connThrottleWeights returns the weights in force, corrected as ZooKeeper corrects them: the
// global and renew weights are at least the local one.
func (c *Config) connThrottleWeights() throttleWeights {
	w := throttleWeights{global: c.ConnThrottleGlobalSessionWeight, local: c.ConnThrottleLocalSessionWeight, renew: c.ConnThrottleRenewSessionWeight}
	w.global = max(w.global, w.local)
	w.renew = max(w.renew, w.local)
	return w
}
