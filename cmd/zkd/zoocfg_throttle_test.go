package main

import (
	"bytes"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/zkd-io/zkd/server"
)

// Every overload key is read with or without the zookeeper. prefix, into server.Config.
func TestParseZooCfgThrottling(t *testing.T) {
	base := "dataDir=" + t.TempDir() + "\nclientPort=2181\n"
	lines := []string{
		"globalOutstandingLimit=50",
		"request_throttle_max_requests=20",
		"request_throttle_stall_time=30",
		"request_throttle_drop_stale=false",
		"connection_throttle_tokens=7",
		"connection_throttle_fill_time=5",
		"connection_throttle_fill_count=2",
		"connection_throttle_freeze_time=40",
		"connection_throttle_drop_increase=0.1",
		"connection_throttle_drop_decrease=0.01",
		"connection_throttle_decrease_ratio=0.5",
		"connection_throttle_weight_enabled=true",
		"connection_throttle_global_session_weight=4",
		"connection_throttle_local_session_weight=2",
		"connection_throttle_renew_session_weight=3",
		"largeRequestThreshold=1000",
		"largeRequestMaxBytes=5000",
	}
	want := server.Config{
		GlobalOutstandingLimit: 50, RequestThrottleMaxRequests: 20, RequestThrottleStallTime: 30 * time.Millisecond,
		RequestThrottleKeepStale: true, ConnThrottleTokens: 7, ConnThrottleFillTime: 5 * time.Millisecond,
		ConnThrottleFillCount: 2, ConnThrottleFreezeTime: 40 * time.Millisecond, ConnThrottleDropIncrease: 0.1,
		ConnThrottleDropDecrease: 0.01, ConnThrottleDecreaseRatio: 0.5, ConnThrottleWeightEnabled: true,
		ConnThrottleGlobalSessionWeight: 4, ConnThrottleLocalSessionWeight: 2, ConnThrottleRenewSessionWeight: 3,
		LargeRequestThreshold: 1000, LargeRequestMaxBytes: 5000,
	}
	for _, prefix := range []string{"", "zookeeper."} {
		st, err := parseZooCfg(strings.NewReader(base+prefix+strings.Join(lines, "\n"+prefix)+"\n"), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("prefix %q: %v", prefix, err)
		}
		c := st.cfg
		got := server.Config{
			GlobalOutstandingLimit: c.GlobalOutstandingLimit, RequestThrottleMaxRequests: c.RequestThrottleMaxRequests,
			RequestThrottleStallTime: c.RequestThrottleStallTime, RequestThrottleKeepStale: c.RequestThrottleKeepStale,
			ConnThrottleTokens: c.ConnThrottleTokens, ConnThrottleFillTime: c.ConnThrottleFillTime,
			ConnThrottleFillCount: c.ConnThrottleFillCount, ConnThrottleFreezeTime: c.ConnThrottleFreezeTime,
			ConnThrottleDropIncrease: c.ConnThrottleDropIncrease, ConnThrottleDropDecrease: c.ConnThrottleDropDecrease,
			ConnThrottleDecreaseRatio: c.ConnThrottleDecreaseRatio, ConnThrottleWeightEnabled: c.ConnThrottleWeightEnabled,
			ConnThrottleGlobalSessionWeight: c.ConnThrottleGlobalSessionWeight, ConnThrottleLocalSessionWeight: c.ConnThrottleLocalSessionWeight,
			ConnThrottleRenewSessionWeight: c.ConnThrottleRenewSessionWeight,
			LargeRequestThreshold:          c.LargeRequestThreshold, LargeRequestMaxBytes: c.LargeRequestMaxBytes,
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("prefix %q: got %+v; want %+v", prefix, got, want)
		}
		if len(st.ignored) != 0 {
			t.Errorf("prefix %q: ignored %v", prefix, st.ignored)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("prefix %q: %v", prefix, err)
		}
	}
}

// ZooKeeper's special values: a freeze time of -1 is off and 0 adjusts at every connection; a
// stall time of 0 waits until a request finishes.
func TestParseZooCfgThrottlingSpecialValues(t *testing.T) {
	base := "dataDir=" + t.TempDir() + "\nclientPort=2181\n"
	for line, check := range map[string]func(server.Config) bool{
		"connection_throttle_freeze_time=-1": func(c server.Config) bool { return c.ConnThrottleFreezeTime == 0 },
		"connection_throttle_freeze_time=0": func(c server.Config) bool {
			return c.ConnThrottleFreezeTime > 0 && c.ConnThrottleFreezeTime < time.Millisecond
		},
		"request_throttle_stall_time=0": func(c server.Config) bool { return c.RequestThrottleStallTime > time.Hour },
		"largeRequestThreshold=-1":      func(c server.Config) bool { return c.LargeRequestThreshold == 0 },
		"largeRequestThreshold=0":       func(c server.Config) bool { return c.LargeRequestThreshold == 0 },
		"largeRequestMaxBytes=-3":       func(c server.Config) bool { return c.LargeRequestMaxBytes == 0 },
	} {
		st, err := parseZooCfg(strings.NewReader(base+line+"\n"), slog.New(slog.DiscardHandler))
		if err != nil || !check(st.cfg) {
			t.Errorf("%s: %v, config %+v", line, err, st.cfg)
		}
	}
	for _, bad := range []string{
		"globalOutstandingLimit=0", "request_throttle_max_requests=-1", "request_throttle_stall_time=x",
		"connection_throttle_tokens=-2", "connection_throttle_freeze_time=-5", "connection_throttle_decrease_ratio=2",
		"connection_throttle_drop_increase=0", "request_throttle_drop_stale=maybe",
	} {
		if _, err := parseZooCfg(strings.NewReader(base+bad+"\n"), slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), strings.SplitN(bad, "=", 2)[0]) {
			t.Errorf("%s: err %v; want an error naming the key", bad, err)
		}
	}
}

// throttled_op_wait_time is accepted and not honoured, with a warning that says why.
func TestParseZooCfgThrottledOpWaitTime(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	st, err := parseZooCfg(strings.NewReader("dataDir="+t.TempDir()+"\nclientPort=2181\nzookeeper.throttled_op_wait_time=100\n"), log)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ignored) != 0 {
		t.Errorf("ignored %v; the key is handled (with a warning)", st.ignored)
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "ThrottledOp") {
		t.Errorf("log %q; want a warning that ThrottledOp is never sent", out)
	}
}
