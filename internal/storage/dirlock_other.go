//go:build !unix

package storage

import (
	"fmt"
	"os"
	"path/filepath"
)

// lockDir opens dir/LOCK without locking it: advisory locks are only taken on Unix.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("consensus: lock data dir: %w", err)
	}
	return f, nil
}
