package znode

import (
	"strings"

	"github.com/zkd-io/zkd/jute"
)

// ValidatePath checks path against ZooKeeper's PathUtils rules and returns jute.CodeBadArguments if
// it breaks one: it must start with '/', must not end with '/' (except "/" itself), must have no
// empty, "." or ".." segment, and must not contain U+0000-U+001F, U+007F-U+009F, U+D800-U+F8FF
// (which in Java's UTF-16 includes every character outside the Basic Multilingual Plane) or
// U+FFF0-U+FFFF. Bytes that are not valid UTF-8 read as U+FFFD and are refused too.
func ValidatePath(path string) error {
	if len(path) == 0 || path[0] != '/' {
		return jute.CodeBadArguments
	}
	if len(path) == 1 {
		return nil
	}
	if path[len(path)-1] == '/' {
		return jute.CodeBadArguments
	}
	segStart := 1
	for i, r := range path {
		if i == 0 {
			continue
		}
		switch {
		case r == '/':
			if err := checkSegment(path[segStart:i]); err != nil {
				return err
			}
			segStart = i + 1
		case r < 0x20, r >= 0x7f && r <= 0x9f, r >= 0xd800 && r <= 0xf8ff, r >= 0xfff0:
			// r >= 0xfff0 also covers runes above U+FFFF, which Java sees as surrogates.
			return jute.CodeBadArguments
		}
	}
	return checkSegment(path[segStart:])
}

func checkSegment(seg string) error {
	if seg == "" || seg == "." || seg == ".." {
		return jute.CodeBadArguments
	}
	return nil
}

// splitParent returns the parent path and the last segment of path as ZooKeeper's write path does:
// everything before the last '/' ("/" when that is empty) and everything after it. ok is false when
// path has no '/' or holds a NUL byte.
func splitParent(path string) (parent, name string, ok bool) {
	i := strings.LastIndexByte(path, '/')
	if i < 0 || strings.IndexByte(path, 0) >= 0 {
		return "", "", false
	}
	parent = path[:i]
	if parent == "" {
		parent = "/"
	}
	return parent, path[i+1:], true
}

// isSpecial reports whether path is one of the nodes that can never be deleted.
func isSpecial(path string) bool {
	return path == "/" || path == zookeeperPath || path == quotaPath || path == configPath
}

// segments splits a well-formed path other than "/" into its segments, reusing buf.
func segments(path string, buf []string) []string {
	buf = buf[:0]
	rest := path[1:]
	for {
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return append(buf, rest)
		}
		buf = append(buf, rest[:i])
		rest = rest[i+1:]
	}
}
