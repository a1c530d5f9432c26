package server

// connLimit returns the most client connections the server holds at once, and whether the file
// descriptor limit (fds, the process's RLIMIT_NOFILE; 0 when unknown) set it rather than
// maxConns (zoo.cfg's maxCnxns; 0 or less: none). It returns 0 when nothing limits them.
//
// A process out of file descriptors cannot open a log segment, a snapshot or a directory to
// fsync, and a consensus node whose durable state cannot be written stops: a connection storm
// must not be able to take the server down. So however maxCnxns is set, client connections
// leave a reserve of descriptors for storage, peers and the admin server: a twentieth of the
// limit, at least 256 (half of a tiny limit) and at most 4096.
func connLimit(maxConns int, fds uint64) (limit int, byFDs bool) {
	if fds == 0 || fds > 1<<30 {
		return max(maxConns, 0), false
	}
	n := int(fds)
	reserve := min(4096, max(n/20, min(256, n/2)))
	byFD := n - reserve
	if maxConns > 0 && maxConns <= byFD {
		return maxConns, false
	}
	return byFD, true
}
