package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/testkit/apachezk"
)

// defaultDuration is how long faults are injected per run by default: with setup, recovery and
// the checks, a run of the zkd target takes about two and a half minutes.
const defaultDuration = 100 * time.Second

// maxReported bounds the violations printed per check and run (all are counted).
const maxReported = 20

// TestMain makes the test binary a lock contender process when it is started as one
// (lockproc.go), and runs the tests otherwise.
func TestMain(m *testing.M) {
	if os.Getenv(ContenderEnv) != "" {
		os.Exit(RunContender())
	}
	os.Exit(m.Run())
}

// TestFaults runs the chaos suite: per target (CHAOS_TARGET, a comma-separated list of zkd and
// zookeeper; default zkd) CHAOS_RUNS runs (default 1) of CHAOS_DURATION of faults (default
// 100s) each, then prints a summary table. CHAOS_SEED replays a schedule. It needs root (network
// namespaces) and skips without it. CHAOS_ZKD_BIN runs a prebuilt zkd binary instead of building
// cmd/zkd (for example one built from an older commit).
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos suite: minutes of fault injection; skipped with -short")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with CHAOS_SEED=%d)", seed, seed)
	ctx := t.Context()
	if err := CheckNetns(ctx); err != nil {
		t.Skipf("SKIPPING THE CHAOS SUITE (internal/testkit/chaos): %v", err)
	}
	if removed, err := Sweep(ctx); err != nil || len(removed) > 0 {
		t.Logf("swept what dead runs left behind: %v (errors: %v)", removed, err)
	}
	targets := strings.Split(envOr("CHAOS_TARGET", TargetZkd), ",")
	duration := defaultDuration
	if s := os.Getenv("CHAOS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("CHAOS_DURATION=%q: %v", s, err)
		}
		duration = d
	}
	runs := 1
	if s := os.Getenv("CHAOS_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n*len(targets) > 26 {
			t.Fatalf("CHAOS_RUNS=%q: want 1 to %d", s, 26/len(targets))
		}
		runs = n
	}
	self, err := os.Executable() // the lock contender processes run the test binary again
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.MkdirTemp("", fmt.Sprintf("chaos-%d-", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept the run directories (server logs and data, clients.log) in %s", base)
			return
		}
		_ = os.RemoveAll(base)
	})

	var results []*RunResult
	runIndex := 0
	for _, target := range targets {
		t.Run(target, func(t *testing.T) {
			var zkdBin string
			switch target {
			case TargetZkd:
				if bin := os.Getenv("CHAOS_ZKD_BIN"); bin != "" {
					zkdBin = bin
					t.Logf("using the zkd binary %s (CHAOS_ZKD_BIN)", bin)
					break
				}
				start := time.Now()
				bin, err := buildZkd(ctx, base, raceEnabled)
				if err != nil {
					t.Fatal(err)
				}
				zkdBin = bin
				t.Logf("built %s (race detector: %v) in %v", bin, raceEnabled, time.Since(start).Round(time.Millisecond))
			case TargetZooKeeper:
				if err := apachezk.Installed(); err != nil {
					t.Skipf("SKIPPING THE ZOOKEEPER TARGET: %v", err)
				}
			default:
				t.Fatalf("CHAOS_TARGET: unknown target %q (want %s or %s)", target, TargetZkd, TargetZooKeeper)
			}
			for r := range runs {
				dir := filepath.Join(base, fmt.Sprintf("%s-%d", target, r))
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				runSeed := seed + uint64(r)
				res, err := Run(ctx, RunConfig{
					Target: target, Run: runIndex, Seed: runSeed, Duration: duration, Dir: dir, ZkdBin: zkdBin,
					Workload: WorkloadConfig{FIFOClients: 4, RegisterClients: 3, LockClients: 3, LockPause: 0.02, TimeoutMs: 6000,
						Windows: []int{10, 50, 200, 50}, DoomedWindow: 50, LockProcesses: 2, ContenderBin: self},
					Logf: t.Logf,
				})
				runIndex++
				results = append(results, res)
				report(t, res, err)
			}
		})
	}
	t.Logf("chaos summary (seed %d, %v of faults per run)\n%s", seed, duration, Summary(results))
}

// report logs a run's statistics and fails the test for each violation, with the seed.
func report(t *testing.T, res *RunResult, err error) {
	t.Helper()
	tag := fmt.Sprintf("[%s run %d, seed %d, dir %s]", res.Target, res.Run, res.Seed, res.Dir)
	for _, s := range res.Stats {
		t.Logf("%s %s", tag, s)
	}
	for _, s := range res.Inconclusive {
		t.Logf("%s inconclusive: %s", tag, s)
	}
	if err != nil {
		t.Errorf("%s the run failed: %v", tag, err)
	}
	// Per check, the first violations of each session (or other subject) first, so that one
	// session with many gaps does not hide the others.
	byCheck := map[string][]Violation{}
	for _, v := range res.Violations {
		byCheck[v.Check] = append(byCheck[v.Check], v)
	}
	for _, check := range Checks {
		vs := byCheck[check]
		if len(vs) == 0 {
			continue
		}
		for _, v := range spreadOut(vs, maxReported) {
			t.Errorf("%s %v", tag, v)
		}
		if len(vs) > maxReported {
			t.Errorf("%s %s: %d violations in all, %d more not shown", tag, check, len(vs), len(vs)-maxReported)
		}
	}
	if (err != nil || len(res.Violations) > 0) && res.Cluster != nil {
		t.Logf("%s server logs:\n%s", tag, res.Cluster.LogTails(40))
	}
	if err == nil {
		t.Logf("%s done in %v: %d violations", tag, res.Elapsed.Round(time.Second), len(res.Violations))
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// spreadOut picks up to n violations, taking them round-robin across their subjects (the text
// before the first colon, e.g. "session f1.0"), in order within each subject.
func spreadOut(vs []Violation, n int) []Violation {
	var subjects []string
	by := map[string][]Violation{}
	for _, v := range vs {
		subject, _, _ := strings.Cut(v.Detail, ":")
		if _, ok := by[subject]; !ok {
			subjects = append(subjects, subject)
		}
		by[subject] = append(by[subject], v)
	}
	var out []Violation
	for round := 0; len(out) < n && len(out) < len(vs); round++ {
		for _, s := range subjects {
			if round < len(by[s]) && len(out) < n {
				out = append(out, by[s][round])
			}
		}
	}
	return out
}
