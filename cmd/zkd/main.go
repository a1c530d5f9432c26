// Command zkd is a ZooKeeper-compatible coordination server replicated with Raft.
//
// Usage:
//
//	zkd                      standalone, durable: client port 2181, data in ./data
//	zkd -config zoo.cfg      an existing ZooKeeper configuration (standalone or server.N cluster)
//	zkd -config zoo.cfg -join  a new member that waits until a reconfig adds it
//	zkd version              print the version and the build (module, revision, commit time)
//	zkd -version             the same
//	zkd verify DIR           check every checksum of a stopped server's data directory
//	zkd dump log DIR         the log, one entry a line (-json)
//	zkd dump snapshot FILE   a snapshot, one znode a line (-json)
//	zkd repair -truncate N DIR  drop the log from entry N on, after damage
//
// SIGINT, SIGTERM and SIGHUP stop it gracefully.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zkd-io/zkd/internal/runtimepolicy"
	"github.com/zkd-io/zkd/internal/storage"
	"github.com/zkd-io/zkd/server"
)

func main() {
	os.Exit(runWith(os.Args[1:], os.Stdout, os.Stderr, true))
}

// run is main without the exit and the runtime policies, for tests.
func run(args []string, stdout, stderr io.Writer) int { return runWith(args, stdout, stderr, false) }

// runWith is run that, with policy set, applies the process's runtime policies while it runs.
func runWith(args []string, stdout, stderr io.Writer, policy bool) int {
	var trimLog atomic.Pointer[slog.Logger] // the server's logger, once it has one
	if policy {
		// The process, not the embeddable server, owns the runtime's settings: the collector's
		// pacing (unless the operator set GOGC) and returning free heap to the OS once idle
		// after a burst (a bulk load, a restart's replay, an import).
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtimepolicy.Run(ctx, func(before, after uint64) {
				if log := trimLog.Load(); log != nil {
					log.Debug("returned free heap to the OS", "beforeMB", before>>20, "afterMB", after>>20)
				}
			})
		}()
		defer func() { stop(); <-done }()
	}
	if len(args) > 0 && args[0] == "version" {
		fmt.Fprint(stdout, server.ReadBuildInfo())
		return 0
	}
	if code, ok := runTool(args, stdout, stderr); ok {
		return code
	}
	fs := flag.NewFlagSet("zkd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage:
  zkd [flags]              a server: standalone on :2181 with ./data, or as -config says
  zkd version              print the version and the build
`+toolsUsage+`
Flags:
`)
		fs.PrintDefaults()
	}
	version := fs.Bool("version", false, "print the version and the build, and exit")
	configPath := fs.String("config", "", "ZooKeeper `zoo.cfg` to read (default: standalone on :2181 with ./data)")
	dataDir := fs.String("data", "", "data directory (overrides dataDir)")
	addr := fs.String("addr", "", "client address host:port (overrides clientPort/clientPortAddress)")
	admin := fs.String("admin", "", "admin HTTP address host:port, or \"off\" (overrides admin.*)")
	jaas := fs.String("jaas", "", "JAAS `file` whose Server section has the SASL users or Kerberos login (overrides zkd.jaasConfig)")
	join := fs.Bool("join", false, "start with no data as a member-to-be that waits for a reconfig to add it")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	logJSON := fs.Bool("log-json", false, "log in JSON instead of text")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *version {
		fmt.Fprint(stdout, server.ReadBuildInfo())
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "zkd: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "zkd: -log-level: %v\n", err)
		return 2
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(stderr, hopts)
	if *logJSON {
		h = slog.NewJSONHandler(stderr, hopts)
	}
	log := slog.New(h)
	trimLog.Store(log)

	st := defaultSettings()
	if *configPath != "" {
		f, err := os.Open(*configPath)
		if err != nil {
			log.Error("cannot read config", "err", err)
			return 1
		}
		st, err = parseZooCfg(f, log)
		f.Close()
		if err != nil {
			log.Error("invalid config", "file", *configPath, "err", err)
			return 1
		}
		for _, k := range st.ignored {
			log.Info("config key ignored: zkd does not use it", "key", k)
		}
	}
	if *dataDir != "" {
		st.cfg.Dir = *dataDir
	}
	if *addr != "" {
		st.cfg.Addr = *addr
		st.cfg.NoPlainListener = false // -addr asks for a plain port even beside a TLS-only zoo.cfg
	}
	switch *admin {
	case "":
	case "off":
		st.cfg.AdminAddr = ""
	default:
		st.cfg.AdminAddr, st.adminExplicit = *admin, true
	}
	st.cfg.Join = *join
	if err := st.sasl.apply(&st.cfg, *jaas); err != nil {
		log.Error("invalid sasl configuration", "err", err)
		return 1
	}
	st.cfg.Logger = log
	if err := os.MkdirAll(st.cfg.Dir, 0o750); err != nil {
		log.Error("cannot create data directory", "dir", st.cfg.Dir, "err", err)
		return 1
	}
	if st.cfg.AdminAddr != "" {
		ln, err := net.Listen("tcp", st.cfg.AdminAddr)
		switch {
		case err == nil:
			st.cfg.AdminListener = ln
		case st.adminExplicit:
			log.Error("cannot open the admin server", "addr", st.cfg.AdminAddr, "err", err)
			return 1
		default:
			log.Warn("admin server disabled: its default port is busy", "addr", st.cfg.AdminAddr, "err", err)
			st.cfg.AdminAddr = ""
		}
	}

	srv, err := server.Start(st.cfg)
	if err != nil {
		if st.cfg.AdminListener != nil {
			_ = st.cfg.AdminListener.Close()
		}
		log.Error("cannot start", "err", err)
		var d *storage.DamageError
		if errors.As(err, &d) {
			fmt.Fprint(stderr, damageAdvice(st.cfg.Dir, d))
		}
		return 1
	}
	if src := st.clientTLS.source; src != nil {
		defer src.Close()
	}
	log.Info("zkd started", "version", server.Version, "client", srv.Addr(), "clientTLS", clientTLSMode(st.cfg),
		"secureClient", srv.SecureAddr(), "admin", srv.AdminAddr(),
		"dataDir", st.cfg.Dir, "serverID", srv.Stats().ServerID, "peers", len(st.cfg.Peers))

	sig := make(chan os.Signal, 1)
	// SIGHUP (a closed terminal, or an operator's reload habit) stops it gracefully too: by
	// default it would end the process on the spot.
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)
	s := <-sig
	log.Info("shutting down", "signal", s.String())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Error("shutdown", "err", err)
		return 1
	}
	return 0
}
