//go:build long

package consensus

import "time"

// With -tags long (make target "test-long") the linearizability workload runs for a minute.
func init() { linearizabilityDuration = 60 * time.Second }
