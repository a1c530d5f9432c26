//go:build !unix

package procpace

// selfProcess reports that this platform's CPU time is not read: the pacer does nothing.
func selfProcess() (process, bool) { return nil, false }
