// Command zkbench is a load generator for ZooKeeper-compatible servers (zkd or Apache ZooKeeper).
//
// Usage:
//
//	zkbench -addr 127.0.0.1:2181 -workload set -clients 64 -conns 8 -duration 30s
//	zkbench -addr ... -workload get -rate 20000 -duration 30s     open loop at a fixed offered rate
//	zkbench -smoke -addr ...                                       every workload for a moment
//	zkbench populate -addr ... -n 1000000 -size 128               create znodes and keep them
//	zkbench compare -zkd bin/zkd -out docs/benchmarks.md           zkd against ZooKeeper, side by side
//	zkbench zookeeper -dir /tmp/zk -addr 127.0.0.1:21810           a real ZooKeeper until Ctrl-C
//	zkbench floor -dir /tmp/floor -port 21810                      the floor server (floor.go): a yardstick
//	zkbench flood -addr ... -pid PID                               well-behaved clients beside a flood
//	zkbench idle -addr ... -pid PID -sessions 5000                 server memory per idle session
//	zkbench scale -zkd bin/zkd -out docs/benchmarks.md             10 M znodes, a wide node, sessions, watches
//	zkbench hold -addr a,b,c -sessions 15000                       hold sessions, reattach them as clients do
//
// Workloads: create, set, get, mixed (-read-ratio), multi (-multi-ops setData per multi), churn
// (ephemeral-sequential create then delete), large (setData of 256 KiB values unless -size is at
// least 64 KiB), lock (herd-free lock recipe, one session per contender), watch (-watchers sessions
// watching one node; latency from the write to each notification), session (open and close).
//
// In closed-loop mode (the default) -clients goroutines each issue one request at a time over
// -conns connections, so each connection carries clients/conns pipelined requests. With -rate,
// requests are issued on a fixed schedule and latency counts from each request's intended send
// time, so a stalled server is charged for every request it delayed (no coordinated omission).
// A run ends after -duration or -ops operations, whichever comes first, and removes its nodes.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := realMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(1)
	}
}

// realMain dispatches to a subcommand.
func realMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "populate":
			return populateMain(ctx, args[1:], stdout, stderr)
		case "compare":
			return compareMain(ctx, args[1:], stdout, stderr)
		case "zookeeper":
			return zookeeperMain(ctx, args[1:], stdout, stderr)
		case "floor":
			return floorMain(ctx, args[1:], stdout, stderr)
		case "flood":
			return floodMain(ctx, args[1:], stdout, stderr)
		case "idle":
			return idleMain(ctx, args[1:], stdout, stderr)
		case "scale":
			return scaleMain(ctx, args[1:], stdout, stderr)
		case "hold":
			return holdMain(ctx, args[1:], os.Stdin, stdout, stderr)
		}
	}
	return benchMain(ctx, args, stdout, stderr)
}

// benchFlags registers the flags of one run on fs.
func benchFlags(fs *flag.FlagSet, cfg *config, addrs *string) {
	fs.StringVar(addrs, "addr", "127.0.0.1:2181", "comma-separated server addresses")
	fs.StringVar(&cfg.Workload, "workload", "set", "workload: "+strings.Join(workloadNames(), ", "))
	fs.IntVar(&cfg.Clients, "clients", 16, "concurrent clients (closed loop), or the number of lock contenders")
	fs.IntVar(&cfg.Conns, "conns", 0, "connections (sessions) shared by the clients; 0 means min(clients, 8)")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to run (0: until -ops)")
	fs.Int64Var(&cfg.Ops, "ops", 0, "stop after this many operations (0: no limit)")
	fs.Float64Var(&cfg.Rate, "rate", 0, "open loop: offered operations per second (0: closed loop)")
	fs.IntVar(&cfg.MaxInFlight, "max-inflight", 10000, "open loop: most operations outstanding at once")
	fs.IntVar(&cfg.Size, "size", 128, "value size in bytes")
	fs.IntVar(&cfg.Keys, "keys", 1000, "keys for set, get, mixed, multi and large")
	fs.Float64Var(&cfg.ReadRatio, "read-ratio", 0.9, "mixed: fraction of reads")
	fs.IntVar(&cfg.MultiOps, "multi-ops", 4, "multi: setData ops per multi")
	fs.IntVar(&cfg.Watchers, "watchers", 16, "watch: watcher sessions")
	fs.StringVar(&cfg.Root, "root", "/zkbench", "parent node of the benchmark's nodes")
	fs.DurationVar(&cfg.SessionTimeout, "session-timeout", 30*time.Second, "session timeout asked for")
	fs.DurationVar(&cfg.Progress, "progress", 0, "print a progress line this often (0: every 5s on runs over 10s)")
	fs.StringVar(&cfg.tlsCA, "tls-ca", "", "TLS: connect over TLS, trusting the CA certificates in this PEM file")
	fs.StringVar(&cfg.tlsCert, "tls-cert", "", "TLS: client certificate (PEM) to present, with -tls-key")
	fs.StringVar(&cfg.tlsKey, "tls-key", "", "TLS: the client certificate's private key (PEM)")
}

func benchMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("zkbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	var addrs string
	benchFlags(fs, &cfg, &addrs)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	smoke := fs.Bool("smoke", false, "run every workload briefly and check the results are sane")
	cpuProfile := fs.String("cpuprofile", "", "write the load generator's own CPU profile here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	cfg.Addrs = splitAddrs(addrs)
	if err := cfg.loadTLS(); err != nil {
		return err
	}
	if cfg.Progress == 0 && cfg.Duration > 10*time.Second {
		cfg.Progress = 5 * time.Second
	}
	if *smoke {
		results, err := smokeAll(ctx, cfg.Addrs, stderr)
		for _, r := range results {
			printResult(stdout, r, *asJSON)
		}
		return err
	}
	res, err := run(ctx, cfg, stderr)
	if err != nil && res.Ops == 0 {
		return err
	}
	printResult(stdout, res, *asJSON)
	return err
}

// splitAddrs splits a comma-separated address list.
func splitAddrs(s string) []string {
	var out []string
	for a := range strings.SplitSeq(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// printResult writes res as one JSON line or as a short text block.
func printResult(w io.Writer, res result, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(res)
		_, _ = fmt.Fprintf(w, "%s\n", b)
		return
	}
	l := res.Latency
	mode := res.Mode
	if res.Mode == "open" {
		mode = fmt.Sprintf("open loop at %.0f/s", res.Rate)
	}
	if res.TLS {
		mode += ", TLS"
	}
	_, _ = fmt.Fprintf(w, "%s (%s; %d clients over %d connections, %s) on %s\n",
		res.Workload, res.Unit, res.Clients, res.Conns, mode, strings.Join(res.Addrs, ","))
	_, _ = fmt.Fprintf(w, "  %d ops in %.2fs: %.0f ops/s, %d errors\n", res.Ops, res.Elapsed, res.Throughput, res.Errors)
	_, _ = fmt.Fprintf(w, "  latency us: p50 %.0f  p90 %.0f  p99 %.0f  p99.9 %.0f  max %.0f  (mean %.0f)\n",
		l.P50, l.P90, l.P99, l.P999, l.Max, l.Mean)
	if lc := res.Lock; lc != nil {
		_, _ = fmt.Fprintf(w, "  lock: %d waits on a predecessor, %d watch notifications received by the contenders\n", lc.Waits, lc.Notifications)
	}
	for k, n := range res.ErrorKinds {
		_, _ = fmt.Fprintf(w, "  error %q: %d\n", k, n)
	}
}
