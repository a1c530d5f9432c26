//go:build !unix

package storage

import "os"

// readSegment returns a segment file's bytes and a function to call when they are no longer
// needed.
func readSegment(name string) ([]byte, func(), error) {
	b, err := os.ReadFile(name)
	return b, func() {}, err
}
