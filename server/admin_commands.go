package server

import (
	"net/url"
	"strconv"
	"strings"
)

// The admin commands beyond the first set (zkd's own locks here), and the four-letter words that
// go with them.

// moreAdminCommands maps the names and aliases of these commands to their primary names.
var moreAdminCommands = map[string]string{
	"locks": "locks", "lcks": "locks",
}

// adminCommand returns the primary name of an admin command name or alias.
func adminCommand(name string) (string, bool) {
	if p, ok := adminCommands[name]; ok {
		return p, true
	}
	p, ok := moreAdminCommands[name]
	return p, ok
}

// fillMoreCommand runs one of these commands into out and reports whether name was one of them.
func (s *Server) fillMoreCommand(name string, args url.Values, out map[string]any) bool {
	switch name {
	case "locks":
		if !s.cons.Serving() {
			out["error"] = strings.TrimSuffix(notServing, "\n")
			return true
		}
	default:
		return false
	}
	switch name {
	case "locks":
		threshold := 0
		if v := args.Get("threshold"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				out["error"] = "locks: threshold must be a positive integer, got " + v
				break
			}
			threshold = n
		}
		rep := s.Locks(threshold)
		out["zxid"], out["locks"], out["herd_threshold"], out["herds"] = rep.Zxid, rep.Locks, rep.HerdThreshold, rep.Herds
	}
	return true
}

// moreFourLetterOutput answers the four-letter words these commands add (the server serves).
func (s *Server) moreFourLetterOutput(word string) string {
	switch word {
	case "lcks":
		return s.locksText()
	}
	return ""
}
