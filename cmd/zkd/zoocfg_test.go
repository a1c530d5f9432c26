package main

import (
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseZooCfgStandalone(t *testing.T) {
	dir := t.TempDir()
	cfg := `# a stock ZooKeeper sample
tickTime=2000
initLimit=10
syncLimit=5
dataDir=` + dir + `
clientPort=2182
maxClientCnxns=0
clientTcpKeepAlive=true
4lw.commands.whitelist=ruok, srvr,mntr
admin.enableServer=false
extendedTypesEnabled=true
autopurge.purgeInterval=1
metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider
`
	st, err := parseZooCfg(strings.NewReader(cfg), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	c := st.cfg
	if c.Addr != ":2182" || c.Dir != dir || c.TickTime != 2*time.Second || c.MaxClientConns != -1 ||
		!c.ClientTCPKeepAlive || !c.ExtendedTypesEnabled || c.AdminAddr != "" || len(c.Peers) != 0 {
		t.Errorf("config = %+v", c)
	}
	if strings.Join(c.FourLetterWords, ",") != "ruok,srvr,mntr" {
		t.Errorf("FourLetterWords = %v", c.FourLetterWords)
	}
	if strings.Join(st.ignored, ",") != "initLimit,syncLimit,autopurge.purgeInterval,metricsProvider.className" {
		t.Errorf("ignored = %v", st.ignored)
	}
}

func TestParseZooCfgCluster(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "myid"), []byte("2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := "tickTime=1000\ndataDir=" + dir + "\n" +
		"server.1=127.0.0.1:2888:3888;127.0.0.1:2181\n" +
		"server.2=127.0.0.1:2889:3889;2182\n" +
		"server.3=127.0.0.1:2890:3890:participant;127.0.0.1:2183\n"
	st, err := parseZooCfg(strings.NewReader(cfg), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	c := st.cfg
	if c.ServerID != 2 || len(c.Peers) != 3 || c.Addr != ":2182" || c.Peers[1].PeerAddr != "127.0.0.1:2889" || c.Peers[1].ElectionPort != 3889 {
		t.Errorf("config = %+v", c)
	}
}

func TestParseZooCfgErrorsNameTheKey(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ line, key string }{
		{"tickTime=0", "tickTime"},
		{"maxClientCnxns=lots", "maxClientCnxns"},
		{"clientTcpKeepAlive=sometimes", "clientTcpKeepAlive"},
		{"server.x=127.0.0.1:1:2", "server.x"},
		{"server.1=127.0.0.1:2888", "server.1"},
		{"admin.enableServer=maybe", "admin.enableServer"},
		{"minSessionTimeout=9000\nmaxSessionTimeout=4000", "minSessionTimeout"},
	} {
		cfg := "dataDir=" + dir + "\nclientPort=2181\n" + tc.line + "\n"
		_, err := parseZooCfg(strings.NewReader(cfg), slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: err = %v; want an error naming %s", tc.line, err, tc.key)
		}
	}
}

func TestParseZooCfgSnapshotTriggers(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		lines     string
		threshold uint64
		bytes     uint64
	}{
		{"snapCount=5000\nsnapSizeLimitInKb=1024\n", 5000, 1 << 20},
		{"snapSizeLimitInKb=-1\n", 0, math.MaxUint64},
		{"snapSizeLimitInKb=0\n", 0, math.MaxUint64},
		{"snapSizeLimitInKb=4194304\n", 0, 4 << 30},
	} {
		st, err := parseZooCfg(strings.NewReader("clientPort=2181\ndataDir="+dir+"\n"+tc.lines), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("%q: %v", tc.lines, err)
		}
		c := st.cfg.Consensus
		if c.SnapshotThreshold != tc.threshold || c.SnapshotBytes != tc.bytes {
			t.Errorf("%q: threshold %d, bytes %d; want %d, %d", tc.lines, c.SnapshotThreshold, c.SnapshotBytes, tc.threshold, tc.bytes)
		}
	}
	_, err := parseZooCfg(strings.NewReader("clientPort=2181\ndataDir="+dir+"\nsnapSizeLimitInKb=lots\n"), slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "snapSizeLimitInKb") {
		t.Errorf("a bad snapSizeLimitInKb gave %v", err)
	}
}

func TestParseZooCfgSlowRequestThreshold(t *testing.T) {
	dir := t.TempDir()
	st, err := parseZooCfg(strings.NewReader("dataDir="+dir+"\nclientPort=2181\nzkd.slowRequestThresholdMs=250\n"), slog.New(slog.DiscardHandler))
	if err != nil || st.cfg.SlowRequestThreshold != 250*time.Millisecond {
		t.Errorf("zkd.slowRequestThresholdMs=250: %v, %v", st.cfg.SlowRequestThreshold, err)
	}
	// 0 turns the slow-request log off; the default (no key) is the server's.
	st, err = parseZooCfg(strings.NewReader("dataDir="+dir+"\nclientPort=2181\nzkd.slowRequestThresholdMs=0\n"), slog.New(slog.DiscardHandler))
	if err != nil || st.cfg.SlowRequestThreshold >= 0 {
		t.Errorf("zkd.slowRequestThresholdMs=0: %v, %v; want a negative (off) threshold", st.cfg.SlowRequestThreshold, err)
	}
	if _, err := parseZooCfg(strings.NewReader("dataDir="+dir+"\nclientPort=2181\nzkd.slowRequestThresholdMs=-1\n"), slog.New(slog.DiscardHandler)); err == nil {
		t.Error("zkd.slowRequestThresholdMs=-1 accepted")
	}
}

func TestParseZooCfgHerdWatchThreshold(t *testing.T) {
	dir := t.TempDir()
	st, err := parseZooCfg(strings.NewReader("dataDir="+dir+"\nclientPort=2181\nzkd.herdWatchThreshold=25\n"), slog.New(slog.DiscardHandler))
	if err != nil || st.cfg.HerdWatchThreshold != 25 {
		t.Errorf("zkd.herdWatchThreshold=25: %v, %v", st.cfg.HerdWatchThreshold, err)
	}
	if _, err := parseZooCfg(strings.NewReader("dataDir="+dir+"\nclientPort=2181\nzkd.herdWatchThreshold=0\n"), slog.New(slog.DiscardHandler)); err == nil {
		t.Error("zkd.herdWatchThreshold=0 accepted")
	}
}

func TestParseZooCfgOutboundBounds(t *testing.T) {
	dir := t.TempDir()
	st, err := parseZooCfg(strings.NewReader("dataDir="+dir+"\nclientPort=2181\nzkd.maxOutboundBytes=8388608\nzkd.maxTotalOutboundBytes=-1\n"), slog.New(slog.DiscardHandler))
	if err != nil || st.cfg.MaxOutboundBytes != 8<<20 || st.cfg.MaxTotalOutboundBytes != -1 {
		t.Errorf("outbound bounds: %v, %v, %v", st.cfg.MaxOutboundBytes, st.cfg.MaxTotalOutboundBytes, err)
	}
	for _, bad := range []string{"zkd.maxOutboundBytes=0", "zkd.maxTotalOutboundBytes=lots"} {
		if _, err := parseZooCfg(strings.NewReader("dataDir="+dir+"\nclientPort=2181\n"+bad+"\n"), slog.New(slog.DiscardHandler)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// The file's text becomes the initial_configuration admin command's answer, with its secrets
// redacted: anyone who reaches the admin port may read it.
func TestParseZooCfgInitialConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := "dataDir=" + dir + "\nclientPort=2181\n# a comment: password=kept\n" +
		"DigestAuthenticationProvider.superDigest=super:D/InIHSb7yEEbrWz8b9l71RjZJU=\n"
	st, err := parseZooCfg(strings.NewReader(cfg), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	want := "dataDir=" + dir + "\nclientPort=2181\n# a comment: password=kept\n" +
		"DigestAuthenticationProvider.superDigest=(redacted)\n"
	if st.cfg.InitialConfig != want {
		t.Errorf("InitialConfig =\n%s\nwant\n%s", st.cfg.InitialConfig, want)
	}
	if got := redactSecrets("ssl.keyStore.password: s3cret\n"); got != "ssl.keyStore.password=(redacted)\n" {
		t.Errorf("redactSecrets(ssl.keyStore.password) = %q", got)
	}
}
