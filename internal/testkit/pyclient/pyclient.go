// Package pyclient finds the Python ZooKeeper client the tests drive, kazoo (Debian's
// python3-kazoo), so every suite looks for it the same way.
package pyclient

import (
	"errors"
	"os/exec"
	"sync"
	"testing"
)

// ErrNoKazoo says kazoo cannot be run here and how to install it.
var ErrNoKazoo = errors.New("kazoo is not installed (Debian package python3-kazoo)")

// interpreters are tried in order: Debian's python3-kazoo installs into the system interpreter,
// which a PATH python3 such as pyenv's may not be.
var interpreters = []string{"/usr/bin/python3", "python3"}

var kazoo = sync.OnceValues(func() (string, error) {
	for _, py := range interpreters {
		path, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		// The recipes too: some suites drive kazoo's Lock and Election.
		if exec.Command(path, "-c", "import kazoo.client, kazoo.recipe.lock, kazoo.recipe.election").Run() == nil {
			return path, nil
		}
	}
	return "", ErrNoKazoo
})

// Kazoo returns the path of a python3 that imports kazoo, or ErrNoKazoo.
func Kazoo() (string, error) { return kazoo() }

// KazooPython returns the path of a python3 that imports kazoo, or skips the test.
func KazooPython(t testing.TB) string {
	t.Helper()
	py, err := Kazoo()
	if err != nil {
		t.Skip(err)
	}
	return py
}

// KazooSASLPython returns the path of a python3 that imports kazoo and pure-sasl (kazoo's SASL
// support), or skips the test.
func KazooSASLPython(t testing.TB) string {
	t.Helper()
	py := KazooPython(t)
	if exec.Command(py, "-c", "import puresasl").Run() != nil {
		t.Skip("pure-sasl is not installed (Debian package python3-pure-sasl)")
	}
	return py
}
