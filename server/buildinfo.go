package server

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// BuildInfo describes the running binary, from the build information the Go toolchain records:
// the main module and its version, and the version control revision and commit time a `go build`
// in a checkout stamps (absent in test binaries and builds outside a checkout).
type BuildInfo struct {
	Module    string    // the main module's path
	Version   string    // the main module's version, "(devel)" for a build from a checkout
	Revision  string    // the VCS revision, "" when not stamped
	Time      time.Time // the revision's commit time; else the executable's modification time
	Modified  bool      // the checkout had uncommitted changes
	GoVersion string
	Platform  string // GOOS/GOARCH
}

// ReadBuildInfo returns the running binary's BuildInfo.
var ReadBuildInfo = sync.OnceValue(readBuildInfo)

func readBuildInfo() BuildInfo {
	b := BuildInfo{GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		b.Module, b.Version = bi.Main.Path, bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.time":
				b.Time, _ = time.Parse(time.RFC3339, s.Value)
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Time.IsZero() {
		if exe, err := os.Executable(); err == nil {
			if st, err := os.Stat(exe); err == nil {
				b.Time = st.ModTime()
			}
		}
	}
	return b
}

// String renders b over a few lines, for `zkd version`.
func (b BuildInfo) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "zkd %s\n", Version)
	if b.Module != "" {
		fmt.Fprintf(&s, "module %s %s\n", b.Module, b.Version)
	}
	if b.Revision != "" {
		fmt.Fprintf(&s, "revision %s, committed %s", b.Revision, b.Time.UTC().Format(time.RFC3339))
		if b.Modified {
			s.WriteString(", with uncommitted changes")
		}
		s.WriteByte('\n')
	} else if !b.Time.IsZero() {
		fmt.Fprintf(&s, "no revision recorded; built %s\n", b.Time.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&s, "%s %s\n", b.GoVersion, b.Platform)
	return s.String()
}

// buildDate is the date srvr, envi and the admin server report ("built on ..."), in the form
// ZooKeeper uses and go-zookeeper's srvr parser expects.
func buildDate() string {
	t := ReadBuildInfo().Time
	if t.IsZero() {
		t = time.Unix(0, 0) // unknown, in a form parsers of srvr still read
	}
	return t.UTC().Format("01/02/2006 15:04 GMT")
}
