package clientmatrix

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// cliMt is the C client's command-line shell (Debian zookeeper-bin), multi-threaded build.
const cliMt = "/usr/lib/zookeeper/bin/cli_mt"

// cliDriver runs the C client through cli_mt's interactive shell: connect starts one cli_mt
// process, whose commands run asynchronously and print "<what>: rc = <n>" (or "Error <n> for
// <what>" when the call is refused at once); the driver turns the matrix's commands into
// cli_mt lines and waits for those. cli_mt always writes the 3 bytes "new", so a create's size
// is ignored (the rows that need one skip cli_mt), and it does not show the session password.
type cliDriver struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	mu    sync.Mutex
	state string // the last session event's state
	done  chan struct{}
}

var cliRC = regexp.MustCompile(`^(?:Error (-?\d+) for (.*)|\[(.*)\]: rc = (-?\d+)|(.*): rc = (-?\d+)(?: Stat:)?)$`)

// cliErrNames names the C client's return codes as zookeeper.h does.
var cliErrNames = map[int]string{
	-1: "ZSYSTEMERROR", -2: "ZRUNTIMEINCONSISTENCY", -3: "ZDATAINCONSISTENCY", -4: "ZCONNECTIONLOSS",
	-5: "ZMARSHALLINGERROR", -6: "ZUNIMPLEMENTED", -7: "ZOPERATIONTIMEOUT", -8: "ZBADARGUMENTS",
	-9: "ZINVALIDSTATE", -13: "ZNEWCONFIGNOQUORUM", -14: "ZRECONFIGINPROGRESS", -15: "ZSSLCONNECTIONERROR",
	-100: "ZAPIERROR", -101: "ZNONODE", -102: "ZNOAUTH", -103: "ZBADVERSION",
	-108: "ZNOCHILDRENFOREPHEMERALS", -110: "ZNODEEXISTS", -111: "ZNOTEMPTY", -112: "ZSESSIONEXPIRED",
	-113: "ZINVALIDCALLBACK", -114: "ZINVALIDACL", -115: "ZAUTHFAILED", -116: "ZCLOSING", -117: "ZNOTHING",
	-118: "ZSESSIONMOVED", -119: "ZNOTREADONLY", -120: "ZEPHEMERALONLOCALSESSION", -121: "ZNOWATCHER",
	-123: "ZRECONFIGDISABLED", -124: "ZSESSIONCLOSEDREQUIRESASLAUTH", -125: "ZQUOTAEXCEEDED", -127: "ZTHROTTLEDOP",
}

func cliErrName(rc int) string {
	if n, ok := cliErrNames[rc]; ok {
		return n
	}
	return "rc_" + strconv.Itoa(rc)
}

func (d *cliDriver) do(cmd string, within time.Duration) (string, error) {
	ch := make(chan string, 1)
	deadline := time.Now().Add(within)
	go func() { ch <- d.handle(strings.Fields(cmd), deadline) }()
	select {
	case out := <-ch:
		return out, nil
	case <-time.After(within + time.Second):
		return "", errHang
	}
}

func (d *cliDriver) stop() {
	if d.cmd != nil {
		_ = d.in.Close()
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// start runs cli_mt on addrs and waits for its session.
func (d *cliDriver) start(addrs string, readOnly bool, deadline time.Time) string {
	d.stop()
	args := []string{"-h", addrs}
	if readOnly {
		args = append(args, "-r")
	}
	cmd := exec.Command(cliMt, args...)
	r, w, err := os.Pipe()
	if err != nil {
		return "err " + err.Error()
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return "err " + err.Error()
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return "err " + strings.ReplaceAll(err.Error(), " ", "_")
	}
	_ = w.Close()
	d.cmd, d.in, d.lines, d.done, d.state = cmd, in, make(chan string, 64<<10), make(chan struct{}), "none"
	lines, done := d.lines, d.done
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			if s, ok := strings.CutPrefix(l, "Watcher SESSION_EVENT state = "); ok {
				d.mu.Lock()
				d.state = s
				d.mu.Unlock()
			}
			select {
			case lines <- l:
			default: // more than anyone waits for: drop
			}
		}
		_ = r.Close()
		_ = cmd.Wait()
		close(lines)
		close(done)
	}()
	// cli_mt prints the session event, then the session id (not for a read-only session).
	var id string
	connected := false
	for !connected || id == "" {
		l, ok := d.next(deadline)
		if !ok {
			if l == "NoAnswer" {
				l = "NotConnected" // as the other drivers name it
			}
			return "err " + l
		}
		if s, ok := strings.CutPrefix(l, "Got a new session id: 0x"); ok {
			id = s
		}
		if strings.HasPrefix(l, "Watcher SESSION_EVENT state = CONNECTED") {
			connected = true
		}
		if l == "Watcher SESSION_EVENT state = READONLY_STATE" {
			return "ok - -"
		}
	}
	return "ok " + id + " -"
}

// next returns the next output line, or why there is none ("exited", "NoAnswer").
func (d *cliDriver) next(deadline time.Time) (string, bool) {
	if d.lines == nil {
		return "not_connected", false
	}
	select {
	case l, ok := <-d.lines:
		if !ok {
			return "exited", false
		}
		return l, true
	case <-time.After(time.Until(deadline)):
		return "NoAnswer", false
	}
}

// send writes a cli_mt line and waits for the return code of what (the path, or a reconfig's
// arguments); wait, when not nil, sees every line until then.
func (d *cliDriver) send(line, what string, deadline time.Time, wait func(string)) (rc int, errName string) {
	if d.in == nil {
		return 0, "not_connected"
	}
	if _, err := fmt.Fprintln(d.in, line); err != nil {
		return 0, "exited"
	}
	for {
		l, ok := d.next(deadline)
		if !ok {
			return 0, l
		}
		if wait != nil {
			wait(l)
		}
		m := cliRC.FindStringSubmatch(l)
		switch {
		case m == nil:
		case m[2] == what:
			n, _ := strconv.Atoi(m[1])
			return n, ""
		case m[3] == what:
			n, _ := strconv.Atoi(m[4])
			return n, ""
		case m[5] == what:
			n, _ := strconv.Atoi(m[6])
			return n, ""
		}
	}
}

func (d *cliDriver) getState() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state
}

// result answers a command by its return code.
func result(rc int, errName string, ok string) string {
	switch {
	case errName != "":
		return "err " + errName
	case rc != 0:
		return "err " + cliErrName(rc)
	}
	return strings.TrimSpace("ok " + ok)
}

func (d *cliDriver) handle(a []string, deadline time.Time) string {
	switch a[0] {
	case "connect":
		// Like the other drivers, give up a connect after 8 s.
		if by := time.Now().Add(8 * time.Second); by.Before(deadline) {
			deadline = by
		}
		return d.start(a[1], a[3] == "1", deadline)
	case "create":
		flag := ""
		switch a[3] {
		case "s":
			flag = "+s "
		case "e":
			flag = "+e "
		}
		rc, e := d.send("create "+flag+a[1], a[1], deadline, nil)
		return result(rc, e, a[1])
	case "get":
		rc, e := d.send("get "+a[1], a[1], deadline, nil)
		return result(rc, e, "")
	case "children":
		// ls prints its rc line, then a tab-indented line per child; a get of / after it marks
		// the end.
		rc, e := d.send("ls "+a[1], a[1], deadline, nil)
		if e != "" || rc != 0 {
			return result(rc, e, "")
		}
		n := 0
		mrc, me := d.send("get /", "/", deadline, func(l string) {
			if strings.HasPrefix(l, "\t") {
				n++
			}
		})
		if me != "" || mrc != 0 {
			return result(mrc, me, "")
		}
		return "ok " + strconv.Itoa(n)
	case "addauth":
		// cli_mt's addauth has no completion: a get of / after it tells whether the connection
		// went on (the server answers in order); an auth failure shows as a session event.
		if _, err := fmt.Fprintln(d.in, "addauth "+a[1]+" "+a[2]); err != nil {
			return "err exited"
		}
		rc, e := d.send("get /", "/", deadline, nil)
		if e == "" && rc == 0 && d.getState() != "AUTH_FAILED_STATE" {
			return "ok"
		}
		for d.getState() != "AUTH_FAILED_STATE" {
			if _, ok := d.next(deadline); !ok {
				break
			}
		}
		if d.getState() == "AUTH_FAILED_STATE" {
			return "err ZAUTHFAILED"
		}
		return result(rc, e, "")
	case "reconfig":
		rc, e := d.send("reconfig -remove 99", "-remove 99", deadline, nil)
		return result(rc, e, "")
	case "probe":
		// An ephemeral create, a get with a watch, a delete, and the watch delivered.
		if rc, e := d.send("create +e "+a[1], a[1], deadline, nil); e != "" || rc != 0 {
			return result(rc, e, "")
		}
		if rc, e := d.send("get "+a[1], a[1], deadline, nil); e != "" || rc != 0 {
			return result(rc, e, "")
		}
		fired := false
		event := func(l string) {
			if strings.HasPrefix(l, "Watcher DELETED_EVENT") && strings.HasSuffix(l, " for path "+a[1]) {
				fired = true
			}
		}
		if rc, e := d.send("delete "+a[1], a[1], deadline, event); e != "" || rc != 0 {
			return result(rc, e, "")
		}
		watchBy := time.Now().Add(10 * time.Second)
		for !fired {
			l, ok := d.next(watchBy)
			if !ok {
				return "err WatchNotDelivered"
			}
			event(l)
		}
		return "ok"
	case "state":
		if d.done == nil {
			return "ok not_connected"
		}
		select {
		case <-d.done:
			return "ok exited " + d.getState()
		default:
		}
		return "ok " + d.getState()
	case "close":
		if d.in != nil {
			_, _ = fmt.Fprintln(d.in, "quit")
			select {
			case <-d.done:
			case <-time.After(5 * time.Second):
			}
			d.stop()
			d.cmd, d.in, d.lines = nil, nil, nil
		}
		return "ok"
	}
	return "err UnknownCommand"
}
