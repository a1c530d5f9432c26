package chaos

import (
	"sync"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// Outcome is what a client learned about one write.
type Outcome int

// Outcomes.
const (
	Unknown Outcome = iota // no reply before the connection died: it may or may not take effect
	OK                     // a success reply
	Failed                 // a definite error reply: it took no effect
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Failed:
		return "failed"
	default:
		return "unknown"
	}
}

// FIFOWrite is one pipelined create of a FIFO session: sequential node n-… under the session's
// directory with data "<epoch>:<n>", n being its index in FIFOSession.Writes.
type FIFOWrite struct {
	Epoch   int // the session's connection number it was sent on
	Server  int // the server index that connection went to
	Outcome Outcome
	Code    jute.Code // Failed: the error
	Path    string    // OK: the path created
	Zxid    int64     // OK or Failed: the reply's zxid
}

// FIFOSession is the record of one FIFO session: every write in send order.
type FIFOSession struct {
	Name   string
	Dir    string // /fifo/<name>
	Writes []FIFOWrite
	// Protocol lists replies that broke the wire protocol's order (a reply xid other than the
	// oldest outstanding request's).
	Protocol []string
}

// SessionEnd is how a session ended as far as the test knows.
type SessionEnd int

// Session ends.
const (
	EndAlive     SessionEnd = iota // not ended yet
	EndClosed                      // the test sent closeSession
	EndExpired                     // a server answered a reattach with "expired"
	EndAbandoned                   // the test stopped talking to it: it must expire
)

func (e SessionEnd) String() string {
	return [...]string{"alive", "closed", "expired", "abandoned"}[e]
}

// AckedWrite is a write acknowledged to a session, with its reply's zxid.
type AckedWrite struct {
	What string
	Zxid int64
}

// SessionRecord is one workload session. Its ephemeral marker /markers/<Name>/m is the only child
// its parent ever has, so once the marker is gone the parent's pzxid is the session's close zxid.
type SessionRecord struct {
	Name      string
	Kind      string // the workload: fifo, doomed, silent, register, lock
	ID        int64
	Marker    string     // the marker's path once its creation was confirmed, else ""
	End       SessionEnd // how it ended
	CloseZxid int64      // closeSession's reply zxid, 0 when no reply came
	// Owns are subtrees whose every node this session created (and nobody else writes).
	Owns  []string
	Acked []AckedWrite
}

// RegOp is one setData on a register, for the linearizability check.
type RegOp struct {
	Client     int    // porcupine client id; a client with an unknown op is never reused
	Key        string // the register's path
	Version    int32  // the expected version, -1 for an unconditional set
	Data       string
	Call       int64 // ns since the run started
	Return     int64 // ns since the run started; -1 for an unknown outcome
	Outcome    Outcome
	NewVersion int32     // OK: the version the write produced
	Code       jute.Code // Failed: CodeBadVersion or CodeNoNode
}

// RegObs is one version of a register a session saw: read, or produced by its own write.
type RegObs struct {
	Key     string
	Version int32
	Mzxid   int64
	Read    bool // false: the session's own acknowledged write
}

// GuardedWrite is a lock holder's acknowledged guarded write of its token to the resource.
type GuardedWrite struct {
	Session string
	Token   int64 // the lock node's czxid
	Version int32 // the resource's version after the write
	Mzxid   int64
}

// Section is one lock holder's critical section at the external fenced resource: from its first
// write there to its last, with the token it wrote with and how many of its writes the resource
// took and refused (a token lower than one it already took: a holder that lost the lock without
// knowing it yet).
type Section struct {
	Session            string
	Token              int64
	Start, End         time.Time
	Accepted, Rejected int
}

// History collects what every workload client did during a run. Its methods are safe for
// concurrent use; the checks read the fields once every client has stopped.
type History struct {
	mu       sync.Mutex
	sessions []*SessionRecord
	fifo     []*FIFOSession
	regOps   []RegOp
	obs      map[string][]RegObs // by session name, in order
	guarded  []GuardedWrite
	clientID int // next porcupine client id
	// fenceTop is the highest token the external fenced resource has taken; sections are the
	// lock holders' critical sections there.
	fenceTop int64
	sections []Section
}

// NewHistory returns an empty History.
func NewHistory() *History { return &History{obs: map[string][]RegObs{}} }

// session adds a session record and returns it; change it only through update.
func (h *History) session(name, kind string) *SessionRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &SessionRecord{Name: name, Kind: kind}
	h.sessions = append(h.sessions, s)
	return s
}

// fifoSession adds a FIFO session record.
func (h *History) fifoSession(name, dir string) *FIFOSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := &FIFOSession{Name: name, Dir: dir}
	h.fifo = append(h.fifo, f)
	return f
}

// update runs f under the history's lock: every change to a record goes through it.
func (h *History) update(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f()
}

// newClient returns a fresh porcupine client id.
func (h *History) newClient() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clientID++
	return h.clientID
}

func (h *History) addRegOp(op RegOp) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.regOps = append(h.regOps, op)
}

func (h *History) addObs(session string, o RegObs) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.obs[session] = append(h.obs[session], o)
}

// fencedWrite is one write to the external resource, which takes it unless a higher token was
// taken before (the check a fenced storage service makes).
func (h *History) fencedWrite(token int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if token < h.fenceTop {
		return false
	}
	h.fenceTop = token
	return true
}

func (h *History) addSection(s Section) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sections = append(h.sections, s)
}

func (h *History) addGuarded(w GuardedWrite) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.guarded = append(h.guarded, w)
}
