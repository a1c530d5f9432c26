package tlsconf

import "time"

// UseClock makes s measure ReloadInterval on now instead of time.Now. It is set before s is
// used, and now must be safe for concurrent use (handshakes read it).
func UseClock(s *Source, now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}
