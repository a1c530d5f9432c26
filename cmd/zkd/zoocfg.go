package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/zkd-io/zkd/server"
)

// settings is what zkd starts from: the server configuration plus what only the binary handles.
type settings struct {
	cfg server.Config
	// adminExplicit reports that the admin address came from the config file; otherwise a busy
	// default port only logs a warning.
	adminExplicit bool
	// ignored lists keys zkd accepts but does not use.
	ignored []string
	// clientTLS holds the client-port TLS keys (zoocfg_tls.go).
	clientTLS clientTLS
	// sasl holds the SASL keys until the -jaas flag is known (zoocfg_sasl.go).
	sasl saslSettings
	// quorum collects the keys for security between servers (zoocfg_quorum.go).
	quorum quorumSecurity
}

// defaultSettings is `zkd` with no arguments: a standalone durable server on port 2181 with its
// data in ./data, and the admin server on 8080 as in ZooKeeper.
func defaultSettings() settings {
	return settings{cfg: server.Config{
		Addr:      ":2181",
		Dir:       "data",
		AdminAddr: ":8080",
	}}
}

// readProperties parses a Java properties file as ZooKeeper reads zoo.cfg: key=value or
// key:value lines, # and ! comments, surrounding blanks trimmed. Later keys win.
func readProperties(r io.Reader) ([][2]string, error) {
	var out [][2]string
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i <= 0 {
			return nil, fmt.Errorf("line %d: %q is not key=value", n, line)
		}
		out = append(out, [2]string{strings.TrimSpace(line[:i]), strings.TrimSpace(line[i+1:])})
	}
	return out, sc.Err()
}

// keyError names the offending key, so a bad zoo.cfg stops startup with a clear message.
func keyError(key, value string, err error) error {
	return fmt.Errorf("zoo.cfg: %s=%q: %w", key, value, err)
}

var errPositive = errors.New("must be a positive integer")

func positiveInt(key, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, keyError(key, v, errPositive)
	}
	return n, nil
}

func nonNegativeInt(key, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, keyError(key, v, errors.New("must be a non-negative integer"))
	}
	return n, nil
}

func boolValue(key, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true", "yes":
		return true, nil
	case "false", "no":
		return false, nil
	}
	return false, keyError(key, v, errors.New("must be true or false"))
}

// serverLine is a parsed server.N value: host:peerPort:electionPort[:role][;[clientHost:]clientPort].
type serverLine struct {
	id           int64
	peerAddr     string
	clientAddr   string
	electionPort int
}

func parseServerLine(key, v string) (serverLine, error) {
	id, err := strconv.ParseInt(strings.TrimPrefix(key, "server."), 10, 64)
	if err != nil || id <= 0 {
		return serverLine{}, keyError(key, v, errors.New("the server id must be a positive integer"))
	}
	addrPart, clientPart, _ := strings.Cut(v, ";")
	fields := strings.Split(addrPart, ":")
	if len(fields) < 3 || len(fields) > 4 {
		return serverLine{}, keyError(key, v, errors.New("want host:peerPort:electionPort[:participant|observer][;[clientHost:]clientPort]"))
	}
	if len(fields) == 4 && fields[3] != "participant" {
		return serverLine{}, keyError(key, v, errors.New("only participants are supported (no observers)"))
	}
	if _, err := strconv.ParseUint(fields[1], 10, 16); err != nil {
		return serverLine{}, keyError(key, v, errors.New("bad peer port"))
	}
	election, err := strconv.ParseUint(fields[2], 10, 16)
	if err != nil {
		return serverLine{}, keyError(key, v, errors.New("bad election port"))
	}
	sl := serverLine{id: id, peerAddr: net.JoinHostPort(fields[0], fields[1]), electionPort: int(election)}
	if clientPart != "" {
		host, port := "0.0.0.0", clientPart
		if i := strings.LastIndexByte(clientPart, ':'); i >= 0 {
			host, port = clientPart[:i], clientPart[i+1:]
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return serverLine{}, keyError(key, v, errors.New("bad client port"))
		}
		sl.clientAddr = net.JoinHostPort(host, port)
	}
	return sl, nil
}

// parseZooCfg turns a zoo.cfg into settings. Relative paths (dataDir) are taken relative to the
// working directory, as ZooKeeper does. The myid file in dataDir names this server in a cluster.
func parseZooCfg(r io.Reader, log *slog.Logger) (settings, error) {
	st := defaultSettings()
	st.cfg.Dir = ""
	text, err := io.ReadAll(r)
	if err != nil {
		return st, fmt.Errorf("zoo.cfg: %w", err)
	}
	props, err := readProperties(bytes.NewReader(text))
	if err != nil {
		return st, fmt.Errorf("zoo.cfg: %w", err)
	}
	cfg := &st.cfg
	cfg.InitialConfig = redactSecrets(string(text))
	var (
		clientPort, clientAddr string
		adminAddr, adminPort   = "0.0.0.0", "8080"
		adminEnabled           = true
		servers                []serverLine
		tick                   = 3000
		minTO, maxTO           int
	)
	for _, kv := range props {
		key, v := kv[0], kv[1]
		k := strings.TrimPrefix(key, "zookeeper.")
		if err := refuseUnimplementedSecurity(key, k, v); err != nil {
			return st, err
		}
		switch {
		case k == "tickTime":
			if tick, err = positiveInt(key, v); err != nil {
				return st, err
			}
		case k == "dataDir":
			cfg.Dir = v
		case k == "dataLogDir":
			if v != "" {
				log.Info("dataLogDir: zkd keeps its log in dataDir/raft", "dataLogDir", v)
			}
		case k == "clientPort":
			if _, err := nonNegativeInt(key, v); err != nil {
				return st, err
			}
			clientPort = v
		case k == "clientPortAddress":
			clientAddr = v
		case k == "initLimit" || k == "syncLimit" || k == "connectToLearnerMasterLimit":
			// Checked as ZooKeeper checks them, but Raft's own timeouts govern followers.
			if _, err := positiveInt(key, v); err != nil {
				return st, err
			}
			st.ignored = append(st.ignored, key)
		case strings.HasPrefix(k, "server."):
			sl, err := parseServerLine(key, v)
			if err != nil {
				return st, err
			}
			servers = append(servers, sl)
		case k == "maxClientCnxns":
			n, err := nonNegativeInt(key, v)
			if err != nil {
				return st, err
			}
			cfg.MaxClientConns = n
			if n == 0 {
				cfg.MaxClientConns = -1
			}
		case k == "clientTcpKeepAlive":
			if cfg.ClientTCPKeepAlive, err = boolValue(key, v); err != nil {
				return st, err
			}
		case k == "maxCnxns":
			if cfg.MaxConns, err = nonNegativeInt(key, v); err != nil {
				return st, err
			}
		case k == "minSessionTimeout":
			if minTO, err = nonNegativeInt(key, v); err != nil {
				return st, err
			}
		case k == "maxSessionTimeout":
			if maxTO, err = nonNegativeInt(key, v); err != nil {
				return st, err
			}
		case k == "4lw.commands.whitelist":
			var words []string
			for w := range strings.SplitSeq(v, ",") {
				if w = strings.TrimSpace(w); w != "" {
					words = append(words, w)
				}
			}
			cfg.FourLetterWords = words
		case k == "admin.enableServer":
			if adminEnabled, err = boolValue(key, v); err != nil {
				return st, err
			}
		case k == "admin.serverAddress":
			adminAddr = v
			st.adminExplicit = true
		case k == "admin.serverPort":
			if _, err := positiveInt(key, v); err != nil {
				return st, err
			}
			adminPort = v
			st.adminExplicit = true
		case k == "admin.commandURL":
			cfg.AdminCommandURL = v
		case k == "zkd.rebuildOnDamage":
			if cfg.Consensus.RebuildOnDamage, err = boolValue(key, v); err != nil {
				return st, err
			}
		case k == "admin.snapshot.enabled":
			on, err := boolValue(key, v)
			if err != nil {
				return st, err
			}
			cfg.AdminSnapshotDisabled = !on
		case k == "admin.snapshot.intervalInMS":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return st, keyError(key, v, errors.New("must be an integer"))
			}
			cfg.AdminSnapshotInterval = time.Duration(n) * time.Millisecond
			if n <= 0 {
				cfg.AdminSnapshotInterval = -1 // no limit
			}
		case k == "admin.enablePprof":
			if cfg.EnablePprof, err = boolValue(key, v); err != nil {
				return st, err
			}
		case k == "extendedTypesEnabled":
			if cfg.ExtendedTypesEnabled, err = boolValue(key, v); err != nil {
				return st, err
			}
		case k == "reconfigEnabled":
			if cfg.ReconfigEnabled, err = boolValue(key, v); err != nil {
				return st, err
			}
		case isClientTLSKey(k, v):
			if err := st.clientTLS.set(key, k, v); err != nil {
				return st, err
			}
		case k == "DigestAuthenticationProvider.superDigest":
			cfg.SuperDigest = v
		case k == "jute.maxbuffer":
			if cfg.MaxFrameSize, err = positiveInt(key, v); err != nil {
				return st, err
			}
		case k == "snapCount":
			n, err := positiveInt(key, v)
			if err != nil {
				return st, err
			}
			cfg.Consensus.SnapshotThreshold = uint64(n)
		case k == "snapSizeLimitInKb":
			// ZooKeeper's meaning: KiB of transaction log since the last snapshot that trigger
			// the next one; zero or negative turns the size trigger off.
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return st, keyError(key, v, errors.New("must be an integer"))
			}
			if n <= 0 || n > math.MaxInt64>>10 {
				cfg.Consensus.SnapshotBytes = math.MaxUint64
			} else {
				cfg.Consensus.SnapshotBytes = uint64(n) << 10
			}
		case k == "autopurge.snapRetainCount":
			n, err := positiveInt(key, v)
			if err != nil {
				return st, err
			}
			cfg.Consensus.SnapshotRetain = max(n, 3)
		case k == "znode.container.checkIntervalMs":
			n, err := positiveInt(key, v)
			if err != nil {
				return st, err
			}
			cfg.Consensus.ReapInterval = time.Duration(n) * time.Millisecond
		case k == "znode.container.maxPerMinute":
			if cfg.Consensus.ReapMaxPerInterval, err = positiveInt(key, v); err != nil {
				return st, err
			}
		case k == "znode.container.maxNeverUsedIntervalMs":
			n, err := nonNegativeInt(key, v)
			if err != nil {
				return st, err
			}
			cfg.Consensus.ContainerNeverUsedInterval = int64(n)
		case k == "nio.sessionlessCnxnTimeout":
			n, err := positiveInt(key, v)
			if err != nil {
				return st, err
			}
			cfg.SessionlessTimeout = time.Duration(n) * time.Millisecond
		case k == "zkd.slowRequestThresholdMs":
			// zkd's own: requests slower than this many milliseconds are logged; 0 turns it off.
			n, err := nonNegativeInt(key, v)
			if err != nil {
				return st, err
			}
			cfg.SlowRequestThreshold = time.Duration(n) * time.Millisecond
			if n == 0 {
				cfg.SlowRequestThreshold = -1
			}
		case k == "zkd.herdWatchThreshold":
			if cfg.HerdWatchThreshold, err = positiveInt(key, v); err != nil {
				return st, err
			}
		case k == "zkd.maxOutboundBytes":
			if cfg.MaxOutboundBytes, err = positiveInt(key, v); err != nil {
				return st, err
			}
		case k == "zkd.maxTotalOutboundBytes":
			// 0 keeps the default; a negative value turns the server-wide bound off.
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return st, fmt.Errorf("zoo.cfg: %s=%q: not a whole number of bytes", key, v)
			}
			cfg.MaxTotalOutboundBytes = n
		case isThrottleKey(k):
			if err := setThrottle(cfg, key, k, v, log); err != nil {
				return st, err
			}
		case isQuorumSecurityKey(k):
			if err := st.quorum.set(&st, key, k, v); err != nil {
				return st, err
			}
		case isSASLKey(k):
			if err := st.sasl.set(key, k, v); err != nil {
				return st, err
			}
		case k == "standaloneEnabled":
			if _, err := boolValue(key, v); err != nil {
				return st, err
			}
			st.ignored = append(st.ignored, key)
		default:
			if isSecurityKey(k) && securityKeys[k] {
				// Fail closed: a security key marked implemented must have its own case above.
				return st, fmt.Errorf("zoo.cfg: %s: security setting not applied (a zkd bug); refusing to start", key)
			}
			st.ignored = append(st.ignored, key)
		}
	}
	if cfg.Dir == "" {
		return st, errors.New("zoo.cfg: dataDir is required")
	}
	if err := st.quorum.apply(cfg, log); err != nil {
		return st, err
	}
	cfg.TickTime = time.Duration(tick) * time.Millisecond
	cfg.MinSessionTimeout = time.Duration(minTO) * time.Millisecond
	cfg.MaxSessionTimeout = time.Duration(maxTO) * time.Millisecond
	if minTO > 0 && maxTO > 0 && minTO > maxTO {
		return st, keyError("minSessionTimeout", strconv.Itoa(minTO), errors.New("is above maxSessionTimeout"))
	}

	if len(servers) > 0 {
		myid, err := readMyID(cfg.Dir)
		if err != nil {
			return st, err
		}
		cfg.ServerID = myid
		self := false
		for _, sl := range servers {
			cfg.Peers = append(cfg.Peers, server.Peer{ID: sl.id, PeerAddr: sl.peerAddr, ClientAddr: sl.clientAddr, ElectionPort: sl.electionPort})
			if sl.id == myid {
				self = true
				if clientPort == "" && sl.clientAddr != "" {
					h, p, _ := net.SplitHostPort(sl.clientAddr)
					clientPort = p
					if clientAddr == "" && h != "0.0.0.0" {
						clientAddr = h
					}
				}
			}
		}
		if !self {
			return st, fmt.Errorf("zoo.cfg: myid %d has no server.%d line", myid, myid)
		}
		if len(servers) == 1 {
			// A single server line runs standalone, as ZooKeeper does with standaloneEnabled.
			cfg.PeerAddr = cfg.Peers[0].PeerAddr
			cfg.Peers = nil
		}
	}
	if clientPort == "" && (st.clientTLS.securePort == "" || st.clientTLS.securePort == "0") {
		return st, errors.New("zoo.cfg: clientPort is required (or a ;clientPort in this server's server.N line, or secureClientPort)")
	}
	cfg.Addr = net.JoinHostPort(clientAddr, clientPort)
	if err := st.finishClientTLS(clientPort, log); err != nil {
		return st, err
	}
	cfg.AdminAddr = ""
	if adminEnabled {
		cfg.AdminAddr = net.JoinHostPort(adminAddr, adminPort)
	}
	return st, nil
}

// redactSecrets returns a zoo.cfg's text with the values of its secrets (the super digest, any
// password) replaced, for the initial_configuration admin command, which anyone who reaches the
// admin port may read.
func redactSecrets(text string) string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		t := strings.TrimSpace(line)
		if i := strings.IndexAny(t, "=:"); i > 0 && t[0] != '#' && t[0] != '!' {
			k := strings.ToLower(strings.TrimSpace(t[:i]))
			if strings.HasSuffix(k, "superdigest") || strings.Contains(k, "password") {
				b.WriteString(strings.TrimSpace(t[:i]) + "=(redacted)\n")
				continue
			}
		}
		b.WriteString(line)
	}
	return b.String()
}

// readMyID reads dataDir/myid.
func readMyID(dir string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, "myid"))
	if err != nil {
		return 0, fmt.Errorf("zoo.cfg: a cluster needs the myid file in dataDir: %w", err)
	}
	id, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("zoo.cfg: myid file %q: must hold a positive integer", filepath.Join(dir, "myid"))
	}
	return id, nil
}
