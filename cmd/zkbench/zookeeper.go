package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/zkd-io/zkd/internal/testkit/apachezk"
)

// zookeeperMain runs one standalone Apache ZooKeeper (Debian's package, with the settings the
// comparison uses) in the foreground until ctx ends (Ctrl-C), then stops it: for trying things
// against the reference server by hand, or capturing frames (jute/capture_test.go).
func zookeeperMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("zkbench zookeeper", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "directory for the server's files (required; kept afterwards)")
	addr := fs.String("addr", "127.0.0.1:2181", "client address")
	heap := fs.Int("heap-mb", apachezk.DefaultHeapMB, "JVM heap (-Xmx) in MiB")
	extra := map[string]string{}
	fs.Func("cfg", "extra zoo.cfg key=value (repeatable), e.g. -cfg extendedTypesEnabled=true", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return fmt.Errorf("want key=value, got %q", s)
		}
		extra[k] = v
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("zkbench zookeeper: -dir is required")
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	p, err := apachezk.Launch(apachezk.ServerConfig{Dir: *dir, ClientAddr: *addr, Extra: extra, HeapMB: *heap})
	if err != nil {
		return err
	}
	defer func() { _ = p.Stop() }()
	wait, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := p.WaitReady(wait); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(stdout, "zookeeper on %s, pid %d, ready after %v; files in %s; Ctrl-C stops it\n",
		p.ClientAddr(), p.PID(), time.Since(p.Launched()).Round(time.Millisecond), p.Dir())
	<-ctx.Done()
	return p.Stop()
}
