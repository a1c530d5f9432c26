package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// isFourLetterWord reports whether the first four bytes of a connection are a four-letter word
// rather than a frame length. A ConnectRequest's length prefix starts with zero bytes, so the two
// never collide.
func isFourLetterWord(w string) bool { return knownWord(w) }

// wordAllowed reports whether the whitelist enables w. srvr is always allowed.
func (s *Server) wordAllowed(w string) bool {
	if w == "srvr" {
		return true
	}
	for _, x := range s.cfg.FourLetterWords {
		if x == "*" || x == w {
			return true
		}
	}
	return false
}

// fourLetterWord answers a four-letter word and closes the connection.
func (c *conn) fourLetterWord(_ context.Context, word string) error {
	s := c.s
	var out string
	switch {
	case !s.wordAllowed(word):
		out = word + " is not executed because it is not in the whitelist.\n"
	case word == "stmk":
		var mask [8]byte
		if _, err := io.ReadFull(c.br, mask[:]); err != nil {
			return err
		}
		s.intro.traceMask.Store(int64(binary.BigEndian.Uint64(mask[:])))
		out = s.fourLetterOutput(word)
	default:
		out = s.fourLetterOutput(word)
	}
	c.out.pushRaw([]byte(out))
	c.finish(closeFourLetterWord)
	return nil
}

// notServing is ZooKeeper's answer to most words while the server does not serve.
const notServing = "This ZooKeeper instance is not currently serving requests\n"

// fourLetterOutput computes a four-letter word's text.
func (s *Server) fourLetterOutput(word string) string {
	switch word {
	case "ruok":
		return "imok"
	case "isro":
		return "rw"
	case "gtmk", "stmk":
		return strconv.FormatInt(s.intro.traceMask.Load(), 10)
	case "envi":
		return s.envi()
	case "conf":
		return s.conf()
	case "dirs":
		d := dirSize(s.cfg.Dir)
		return fmt.Sprintf("datadir_size: %d\nlogdir_size: %d\n", d, d)
	}
	if !s.cons.Serving() {
		return notServing
	}
	switch word {
	case "srvr":
		return s.srvr(false)
	case "stat":
		return s.srvr(true)
	case "mntr":
		return s.mntr()
	case "cons":
		var b strings.Builder
		for _, c := range s.sortedConns() {
			b.WriteString(c.consLine())
		}
		b.WriteString("\n")
		return b.String()
	case "crst":
		s.resetConnStats()
		return "Connection stats reset.\n"
	case "srst":
		s.resetStats()
		return "Server stats reset.\n"
	case "wchs":
		ws := s.watches.summary()
		return fmt.Sprintf("%d connections watching %d paths\nTotal watches:%d\n", ws.Connections, ws.Paths, ws.Total)
	case "wchc":
		var b strings.Builder
		m := s.watches.bySession()
		ids := make([]int64, 0, len(m))
		for id := range m {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			fmt.Fprintf(&b, "0x%x\n", id)
			for _, p := range m[id] {
				fmt.Fprintf(&b, "\t%s\n", p)
			}
		}
		b.WriteString("\n")
		return b.String()
	case "wchp":
		var b strings.Builder
		m := s.watches.byPath()
		paths := make([]string, 0, len(m))
		for p := range m {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			fmt.Fprintf(&b, "%s\n", p)
			for _, id := range m[p] {
				fmt.Fprintf(&b, "\t0x%x\n", id)
			}
		}
		b.WriteString("\n")
		return b.String()
	case "dump":
		return s.dump()
	}
	return s.moreFourLetterOutput(word)
}

func (s *Server) srvr(withClients bool) string {
	st := s.Stats()
	var b strings.Builder
	fmt.Fprintf(&b, "Zookeeper version: %s, built on %s\n", st.Version, buildDate())
	if withClients {
		b.WriteString("Clients:\n")
		for _, c := range s.sortedConns() {
			fmt.Fprintf(&b, " /%s[%d](queued=0,recved=%d,sent=%d)\n", c.remote, c.interestOps(), c.stats.received.Load(), c.stats.sent.Load())
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Latency min/avg/max: %d/%.4f/%d\n", st.MinLatency, st.AvgLatency, st.MaxLatency)
	fmt.Fprintf(&b, "Received: %d\n", st.PacketsReceived)
	fmt.Fprintf(&b, "Sent: %d\n", st.PacketsSent)
	fmt.Fprintf(&b, "Connections: %d\n", st.Connections)
	fmt.Fprintf(&b, "Outstanding: %d\n", st.Outstanding)
	fmt.Fprintf(&b, "Zxid: 0x%x\n", st.LastZxid)
	fmt.Fprintf(&b, "Mode: %s\n", st.Mode)
	fmt.Fprintf(&b, "Node count: %d\n", st.NodeCount)
	return b.String()
}

// javaDouble formats v as Java's Double.toString does for ordinary values: shortest digits,
// always with a fraction ("0.0", "12.5").
func javaDouble(v float64) string {
	out := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsAny(out, ".eE") {
		out += ".0"
	}
	return out
}

func (s *Server) mntr() string {
	var b strings.Builder
	for _, kv := range s.mntrPairs() {
		fmt.Fprintf(&b, "zk_%s\t%s\n", kv[0], kv[1])
	}
	return b.String()
}

// confPairs returns conf's keys and values in output order.
func (s *Server) confPairs() [][2]string {
	port, securePort := "-1", "-1"
	if s.ln != nil {
		if i := strings.LastIndexByte(s.Addr(), ':'); i >= 0 {
			port = s.Addr()[i+1:]
		}
	}
	if s.secureLn != nil {
		if i := strings.LastIndexByte(s.SecureAddr(), ':'); i >= 0 {
			securePort = s.SecureAddr()[i+1:]
		}
	}
	d := dirSize(s.cfg.Dir)
	kv := [][2]string{
		{"clientPort", port},
		{"secureClientPort", securePort},
		{"dataDir", s.cfg.Dir},
		{"dataDirSize", fmt.Sprint(d)},
		{"dataLogDir", s.cfg.Dir},
		{"dataLogSize", fmt.Sprint(d)},
		{"tickTime", fmt.Sprint(s.cfg.TickTime.Milliseconds())},
		{"maxClientCnxns", fmt.Sprint(max(s.cfg.MaxClientConns, 0))},
		{"minSessionTimeout", fmt.Sprint(s.cfg.MinSessionTimeout.Milliseconds())},
		{"maxSessionTimeout", fmt.Sprint(s.cfg.MaxSessionTimeout.Milliseconds())},
		{"clientPortListenBacklog", "-1"},
		{"serverId", fmt.Sprint(s.cfg.ServerID)},
	}
	return kv
}

func (s *Server) conf() string {
	var b strings.Builder
	for _, kv := range s.confPairs() {
		fmt.Fprintf(&b, "%s=%s\n", kv[0], kv[1])
	}
	if len(s.cfg.Peers) > 1 {
		b.WriteString("membership: \n")
		for _, p := range s.cfg.Peers {
			fmt.Fprintf(&b, "server.%d=%s:participant;%s\n", p.ID, p.PeerAddr, p.ClientAddr)
		}
	}
	return b.String()
}

func (s *Server) envi() string {
	host, _ := os.Hostname()
	wd, _ := os.Getwd()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var b strings.Builder
	b.WriteString("Environment:\n")
	for _, kv := range [][2]string{
		{"zookeeper.version", Version + ", built on " + buildDate()},
		{"host.name", host},
		{"go.version", runtime.Version()},
		{"os.name", runtime.GOOS},
		{"os.arch", runtime.GOARCH},
		{"user.dir", wd},
		{"os.memory.total", fmt.Sprint(ms.Sys/(1<<20)) + "MB"},
		{"os.memory.used", fmt.Sprint(ms.HeapAlloc/(1<<20)) + "MB"},
	} {
		fmt.Fprintf(&b, "%s=%s\n", kv[0], kv[1])
	}
	return b.String()
}

func (s *Server) dump() string {
	v := s.view()
	var b strings.Builder
	sessions := v.Sessions()
	b.WriteString("SessionTracker dump:\n")
	fmt.Fprintf(&b, "Global Sessions(%d):\n", len(sessions))
	for _, ss := range sessions {
		fmt.Fprintf(&b, "0x%x\t%dms\n", ss.ID, ss.Timeout)
	}
	b.WriteString("ephemeral nodes dump:\n")
	var with []int64
	for _, ss := range sessions {
		if len(v.Ephemerals(ss.ID)) > 0 {
			with = append(with, ss.ID)
		}
	}
	fmt.Fprintf(&b, "Sessions with Ephemerals (%d):\n", len(with))
	for _, id := range with {
		fmt.Fprintf(&b, "0x%x:\n", id)
		for _, p := range v.Ephemerals(id) {
			fmt.Fprintf(&b, "\t%s\n", p)
		}
	}
	cs := slices.DeleteFunc(s.sortedConns(), func(c *conn) bool { return c.session() == 0 })
	b.WriteString("Connections dump:\n")
	fmt.Fprintf(&b, "Connections Sets (1)/(%d):\n", len(cs))
	fmt.Fprintf(&b, "%d expire at %s:\n", len(cs), time.Now().UTC().Format(time.UnixDate))
	for _, c := range cs {
		fmt.Fprintf(&b, "\tip: /%s sessionId: 0x%x\n", c.remote, c.session())
	}
	return b.String()
}

// opAbbrev is ZooKeeper's short name of an op in cons output (lop).
func opAbbrev(op jute.Op) string {
	switch op {
	case jute.OpPing:
		return "PING"
	case jute.OpCreateSession:
		return "SESS"
	case jute.OpMulti:
		return "MULT"
	case jute.OpMultiRead:
		return "MLTR"
	case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL:
		return "CREA"
	case jute.OpDelete, jute.OpDeleteContainer:
		return "DELE"
	case jute.OpSetData:
		return "SETD"
	case jute.OpReconfig:
		return "RECO"
	case jute.OpSetACL:
		return "SETA"
	case jute.OpCloseSession:
		return "CLOS"
	case jute.OpSync:
		return "SYNC"
	case jute.OpCheck:
		return "CHEC"
	case jute.OpExists:
		return "EXIS"
	case jute.OpGetData:
		return "GETD"
	case jute.OpSetWatches:
		return "SETW"
	case jute.OpSetWatches2:
		return "STW2"
	case jute.OpAddWatch:
		return "ADDW"
	case jute.OpGetACL:
		return "GETA"
	case jute.OpGetChildren, jute.OpGetChildren2:
		return "GETC"
	case jute.OpGetAllChildrenNumber:
		return "GETACN"
	case jute.OpCheckWatches:
		return "CHKW"
	case jute.OpRemoveWatches:
		return "REMW"
	case jute.OpWhoAmI:
		return "HOMI"
	case jute.OpGetEphemerals:
		return "GETE"
	}
	return "NA"
}

// interestOps is the number ZooKeeper prints in brackets after a connection's address: the
// selector's interest set, 1 (read) for a client connection, 0 for the four-letter-word
// connection answering.
func (c *conn) interestOps() int {
	if c.flw.Load() {
		return 0
	}
	return 1
}

// consLine is one connection's line of cons, in ZooKeeper's format (the line of a session also
// matches what go-zookeeper's FLWCons parses).
func (c *conn) consLine() string {
	st := &c.stats
	line := fmt.Sprintf(" /%s[%d](queued=%d,recved=%d,sent=%d", c.remote, c.interestOps(), c.queued.Load(), st.received.Load(), st.sent.Load())
	if sid := c.session(); sid != 0 {
		avg := int64(0)
		if n := st.count.Load(); n > 0 {
			avg = st.sumLatency.Load() / n
		}
		line += fmt.Sprintf(",sid=0x%x,lop=%s,est=%d,to=%d", sid, opAbbrev(jute.Op(st.lastOp.Load())),
			st.established.UnixMilli(), c.timeout.Load())
		if lc := st.lastCxid.Load(); lc >= 0 {
			line += fmt.Sprintf(",lcxid=0x%x", lc)
		}
		line += fmt.Sprintf(",lzxid=0x%x,lresp=%d,llat=%d,minlat=%d,avglat=%d,maxlat=%d",
			uint64(st.lastZxid.Load()), st.lastResp.Load(), st.lastLatency.Load(), st.minLatency.Load(), avg, st.maxLatency.Load())
	}
	return line + ")\n"
}

// dirSize is the total size of the files under dir (0 for an in-memory server).
func dirSize(dir string) int64 {
	if dir == "" {
		return 0
	}
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// openFDs counts this process's open file descriptors where /proc is available.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}
