package chaos

import (
	"strings"
	"testing"
	"time"
)

func TestSummary(t *testing.T) {
	rs := []*RunResult{
		{Target: TargetZkd, Seed: 7, Faults: map[string]int{FaultKillOne: 2, FaultPauseLeader: 1},
			Serve:       map[string][]time.Duration{FaultKillOne: {0, time.Second, 3 * time.Second}},
			VictimServe: map[string][]time.Duration{FaultKillOne: {3 * time.Second}},
			Violations:  []Violation{{CheckFIFO, "x"}, {CheckFIFO, "y"}, {CheckSessionEnd, "z"}}},
		{Target: TargetZooKeeper, Seed: 7, Faults: map[string]int{FaultKillOne: 3}},
	}
	s := Summary(rs)
	for _, want := range []string{
		"zkd        1     3       0          0      2     1",
		"zookeeper  1     3       0          0      0     0",
		"kill-one          1 3.0 3.0 3.0  3 0.0 1.0 3.0",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}
