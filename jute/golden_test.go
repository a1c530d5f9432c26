package jute

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goldenFrame is one whole frame (length prefix included) of a captured exchange.
type goldenFrame struct {
	dir   byte   // '>' client to server, '<' server to client
	kind  string // "connect", "notification" or the request's op name
	frame []byte
}

// decodedFrame is a golden frame decoded with this package.
type decodedFrame struct {
	goldenFrame
	req     RequestHeader
	rep     ReplyHeader
	body    Record
	connReq *ConnectRequest
	connRep *ConnectResponse
}

// opByName maps an op's String() (including "op(N)" for unknown values) back to the op.
func opByName(name string) (Op, bool) {
	for o := Op(-20); o <= 200; o++ {
		if o.String() == name {
			return o, true
		}
	}
	return 0, false
}

func readGolden(path string) ([]goldenFrame, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []goldenFrame
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 4<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 || (fields[0] != ">" && fields[0] != "<") {
			return nil, fmt.Errorf("%s:%d: want \"> kind hex\" or \"< kind hex\"", path, n)
		}
		frame, err := hex.DecodeString(fields[2])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		out = append(out, goldenFrame{dir: fields[0][0], kind: fields[1], frame: frame})
	}
	return out, sc.Err()
}

// decodeFrame decodes a golden frame through the frame reader and the decoder for its kind, and
// checks that encoding the result again gives the very same bytes.
func decodeFrame(f goldenFrame) (decodedFrame, error) {
	d := decodedFrame{goldenFrame: f}
	r := bytes.NewReader(f.frame)
	payload, err := ReadFrame(r, nil, 0)
	if err != nil {
		return d, fmt.Errorf("read frame: %w", err)
	}
	if r.Len() != 0 {
		return d, fmt.Errorf("%d bytes after the frame", r.Len())
	}
	var again []byte
	switch {
	case f.kind == "connect" && f.dir == '>':
		d.connReq = &ConnectRequest{}
		if err := Unmarshal(payload, 0, d.connReq); err != nil {
			return d, err
		}
		again = AppendFrame(nil, d.connReq)
	case f.kind == "connect":
		d.connRep = &ConnectResponse{}
		if err := Unmarshal(payload, 0, d.connRep); err != nil {
			return d, err
		}
		again = AppendFrame(nil, d.connRep)
	case f.dir == '>':
		want, ok := opByName(f.kind)
		if !ok {
			return d, fmt.Errorf("unknown kind %q", f.kind)
		}
		d.req, d.body, err = DecodeRequest(payload, 0)
		if d.req.Type != want {
			return d, fmt.Errorf("request type %v, file says %v", d.req.Type, want)
		}
		if err != nil && !(errors.Is(err, ErrUnknownOp) && !want.Known()) {
			return d, err
		}
		again = AppendRequest(nil, d.req, d.body)
	default:
		op, ok := opByName(f.kind)
		if !ok {
			return d, fmt.Errorf("unknown kind %q", f.kind)
		}
		d.rep, d.body, err = DecodeReply(payload, op, 0)
		if err != nil {
			return d, err
		}
		if (d.rep.Xid == XidNotification) != (op == OpNotification) {
			return d, fmt.Errorf("xid %d in a frame of kind %s", d.rep.Xid, f.kind)
		}
		again = AppendReply(nil, d.rep, d.body)
	}
	if !bytes.Equal(again, f.frame) {
		return d, fmt.Errorf("re-encoded frame differs:\n got %x\nwant %x", again, f.frame)
	}
	return d, nil
}

func decodeGolden(f goldenFrame) error {
	_, err := decodeFrame(f)
	return err
}

func TestGoldenFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.hex"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".hex")
		names[name] = true
		t.Run(name, func(t *testing.T) {
			frames, err := readGolden(path)
			if err != nil {
				t.Fatal(err)
			}
			var got []decodedFrame
			for i, f := range frames {
				d, err := decodeFrame(f)
				if err != nil {
					t.Fatalf("frame %d (%c %s): %v", i, f.dir, f.kind, err)
				}
				got = append(got, d)
			}
			check, ok := goldenChecks[name]
			if !ok {
				t.Fatalf("no field checks for %s in goldenChecks", name)
			}
			check(t, got)
		})
	}
	for _, ex := range captureExchanges() {
		if !names[ex.name] {
			t.Errorf("testdata/%s.hex is missing; capture it with TestCapture -update", ex.name)
		}
	}
}
