package chaos

import (
	"fmt"
	"os"
	"testing"
)

func TestNames(t *testing.T) {
	pid := os.Getpid()
	for _, name := range []string{
		fmt.Sprintf("czb%da", pid), fmt.Sprintf("czn%dz3", pid), fmt.Sprintf("czh%dy1", 4194304), fmt.Sprintf("czp%db9", 4194304),
	} {
		if len(name) > 15 {
			t.Errorf("%q is longer than IFNAMSIZ-1 (15)", name)
		}
		if !namePattern.MatchString(name) {
			t.Errorf("%q does not match the sweep pattern", name)
		}
	}
	for _, name := range []string{"eth0", "czb", "czx123a1", "czb12a12", "docker0"} {
		if namePattern.MatchString(name) {
			t.Errorf("%q matches the sweep pattern", name)
		}
	}
	// This process is alive, so its names are not stale; PID 0x3fffff+1 cannot exist.
	if stale(fmt.Sprintf("czb%da", pid)) {
		t.Error("a name of this process is stale")
	}
	if !stale("czn4194305a1") {
		t.Error("a name of a PID that cannot exist is not stale")
	}
}
