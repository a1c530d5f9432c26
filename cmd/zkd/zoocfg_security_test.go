package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// runRefused runs the zkd command in-process on a zoo.cfg holding a data directory that does not
// exist yet, a free client port, the admin server off and extra, and returns the exit code, the
// output and the data directory. Only configurations that must be refused go through here: one
// that starts a server would not return.
func runRefused(t *testing.T, extra string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := filepath.Join(dir, "zoo.cfg")
	text := "dataDir=" + data + "\nclientPort=" + portOf(t, freePort(t)) + "\nadmin.enableServer=false\n" + extra + "\n"
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	code := run([]string{"-config", cfg}, &out, &out)
	return code, out.String(), data
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		t.Fatalf("no port in %q", addr)
	}
	return addr[i+1:]
}

// Every ZooKeeper security setting zkd does not implement, alone in a zoo.cfg, stops startup
// with a message naming it, before anything is written to the data directory.
func TestUnimplementedSecurityKeyStopsStartup(t *testing.T) {
	keys := unimplementedSecurityKeys()
	if len(keys) == 0 {
		t.Skip("every listed security key is implemented")
	}
	for _, k := range keys {
		for _, key := range []string{k, "zookeeper." + k} {
			code, out, data := runRefused(t, key+"=true")
			if code != 1 || !strings.Contains(out, key+":") || !strings.Contains(out, "refusing to start") {
				t.Errorf("%s=true: exit %d, output %q; want exit 1 naming the key", key, code, out)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("%s=true: the data directory was created before the refusal (%v)", key, err)
			}
		}
	}
}

// A security key ZooKeeper may add later, under a security prefix, is refused rather than
// ignored.
func TestUnknownSecurityKeyStopsStartup(t *testing.T) {
	for _, key := range []string{"ssl.someFutureSetting", "ssl.quorum.someFutureSetting", "quorum.auth.someFutureSetting", "authProvider.someFuture"} {
		code, out, _ := runRefused(t, key+"=org.example.Something")
		if code != 1 || !strings.Contains(out, key) || !strings.Contains(out, "refusing to start") {
			t.Errorf("%s: exit %d, output %q; want exit 1 naming the key", key, code, out)
		}
	}
}

// A setting that only turns a feature off asks for nothing zkd lacks, so it is accepted: a
// zoo.cfg that spells out ZooKeeper's defaults starts.
func TestSecurityKeysSwitchedOffAreAccepted(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("dataDir=" + dir + "\nclientPort=2181\n")
	for _, k := range unimplementedSecurityKeys() {
		b.WriteString(k + "=false\n")
	}
	if _, err := parseZooCfg(strings.NewReader(b.String()), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("switched-off security keys refused: %v", err)
	}
	// A key that names something (a file, a provider) has no "off" value but the empty one.
	for _, k := range unimplementedSecurityKeys() {
		if _, err := parseZooCfg(strings.NewReader("dataDir="+dir+"\nclientPort=2181\n"+k+"=\n"), slog.New(slog.DiscardHandler)); err != nil {
			t.Errorf("%s with an empty value refused: %v", k, err)
		}
	}
}

// The real binary, given a secured ZooKeeper's zoo.cfg it cannot honour, exits at once with the
// key named, and no client port is ever opened.
func TestBinaryRefusesUnimplementedSecurity(t *testing.T) {
	keys := unimplementedSecurityKeys()
	if len(keys) == 0 {
		t.Skip("every listed security key is implemented")
	}
	dir := t.TempDir()
	addr := freePort(t)
	cfg := filepath.Join(dir, "zoo.cfg")
	text := "dataDir=" + filepath.Join(dir, "data") + "\nclientPort=" + portOf(t, addr) + "\nadmin.enableServer=false\n" + keys[0] + "=true\n"
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startZkd(t, "-config", cfg)
	err := p.cmd.Wait()
	if err == nil || p.cmd.ProcessState.ExitCode() != 1 || !strings.Contains(p.out.String(), keys[0]+":") {
		t.Fatalf("zkd with %s=true: %v, output %q; want exit 1 naming the key", keys[0], err, p.out.String())
	}
}

// unimplementedSecurityKeys lists the keys refused by refuseUnimplementedSecurity, sorted.
func unimplementedSecurityKeys() []string {
	var out []string
	for k, ok := range securityKeys {
		if !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
