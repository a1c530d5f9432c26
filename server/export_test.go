package server

// SetAfterFire makes s call f in its apply hook after queueing a transaction's watch events and
// before publishing the view that holds the transaction.
func SetAfterFire(s *Server, f func(zxid int64)) { s.afterFire.Store(&f) }
