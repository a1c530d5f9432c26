//go:build !unix

package server

// maxFDs is unknown on this platform.
func maxFDs() uint64 { return 0 }
