package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// smokeDuration is how long each workload runs in smoke mode.
const smokeDuration = 500 * time.Millisecond

// smokeAll runs every workload briefly against addrs (closed loop, plus one open-loop run) and
// checks that each reports sane results: some operations, no errors, ordered percentiles.
func smokeAll(ctx context.Context, addrs []string, log io.Writer) ([]result, error) {
	var results []result
	var errs []error
	for _, name := range workloadNames() {
		cfg := config{Addrs: addrs, Workload: name, Clients: 4, Conns: 2, Duration: smokeDuration, Watchers: 4, Keys: 50}
		res, err := run(ctx, cfg, nil)
		if err == nil {
			err = checkSane(res)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("zkbench: smoke %s: %w", name, err))
		}
		results = append(results, res)
		if log != nil {
			_, _ = fmt.Fprintf(log, "smoke %-8s %6d ops %8.0f/s p50 %6.0fus p99 %6.0fus errors %d\n",
				name, res.Ops, res.Throughput, res.Latency.P50, res.Latency.P99, res.Errors)
		}
	}
	open := config{Addrs: addrs, Workload: "get", Clients: 4, Conns: 2, Duration: smokeDuration, Rate: 500, Keys: 50}
	res, err := run(ctx, open, nil)
	if err == nil {
		err = checkSane(res)
	}
	// The schedule starts after the run's deadline was set, and no op due at or after the
	// deadline is launched: at most 500/s × 500 ms, plus the op due at the start. (How many fewer
	// depends on how busy the machine is, so that is not checked.)
	if err == nil && res.Ops > 251 {
		err = fmt.Errorf("open loop at 500/s for %v completed %d ops, more than were due", smokeDuration, res.Ops)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("zkbench: smoke open-loop get: %w", err))
	}
	results = append(results, res)
	return results, errors.Join(errs...)
}

// errInsane reports a result that cannot be right.
var errInsane = errors.New("zkbench: implausible result")

// checkSane checks the invariants every successful run's result must hold.
func checkSane(r result) error {
	l := r.Latency
	switch {
	case r.Ops == 0:
		return fmt.Errorf("no operations completed: %w", errInsane)
	case r.Errors != 0:
		return fmt.Errorf("%d errors %v: %w", r.Errors, r.ErrorKinds, errInsane)
	case r.Throughput <= 0 || r.Elapsed <= 0:
		return fmt.Errorf("throughput %v over %vs: %w", r.Throughput, r.Elapsed, errInsane)
	case l.Count != uint64(r.Ops):
		return fmt.Errorf("%d latencies for %d ops: %w", l.Count, r.Ops, errInsane)
	case !(0 < l.Min && l.Min <= l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max):
		return fmt.Errorf("percentiles out of order: %+v: %w", l, errInsane)
	case l.Max > 60e6:
		return fmt.Errorf("an operation took %.0f s: %w", l.Max/1e6, errInsane)
	}
	return nil
}
