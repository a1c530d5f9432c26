package zkfile

import (
	"encoding/hex"
	"testing"
)

// ZooKeeper's password for a session, as Java computes it (new java.util.Random(id ^
// 0xB3415C00L).nextBytes of 16 bytes, printed by a JVM).
func TestSessionPasswordMatchesZooKeeper(t *testing.T) {
	for id, want := range map[int64]string{
		0x100000abcdef01:    "536bae4887ad0eee096a93816d42a0b4",
		-0x7f00000000000001: "20f62cb5648dc2d771471c8a2486a9ee",
	} {
		if got := hex.EncodeToString(SessionPassword(id)); got != want {
			t.Errorf("SessionPassword(%#x) = %s, want %s", id, got, want)
		}
	}
}
