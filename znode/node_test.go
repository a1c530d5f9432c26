package znode

import (
	"bytes"
	"strings"
	"testing"
	"unsafe"

	"github.com/zkd-io/zkd/jute"
)

// The node layout is what keeps a large tree small (see node): a field added without care moves it
// into the next size class, 16 or more bytes per znode.
func TestNodeLayout(t *testing.T) {
	if got := unsafe.Sizeof(node{}); got != 48 {
		t.Errorf("node is %d bytes; want 48", got)
	}
	if got := unsafe.Sizeof(nodeExt{}); got > 48 {
		t.Errorf("nodeExt is %d bytes; want at most 48", got)
	}
}

func TestNodeNameAndData(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"", nil},
		{"", []byte{}},
		{"", []byte("root data")},
		{"n", nil},
		{"n", []byte{}},
		{"name", []byte{0, 1, 2}},
		{"a-rather-longer-name-0000000001", bytes.Repeat([]byte{7}, 1000)},
		// The lengths' encodings change width at a name of 63 bytes and data of 127.
		{strings.Repeat("y", 62), bytes.Repeat([]byte{8}, 126)},
		{strings.Repeat("z", 63), bytes.Repeat([]byte{8}, 127)},
		{strings.Repeat("x", 5000), bytes.Repeat([]byte{9}, 127)},
		{"", bytes.Repeat([]byte{10}, 1<<20)},
	}
	for _, tt := range tests {
		for _, kind := range []nodeKind{kindPersistent, kindEphemeral, kindContainer, kindTTL} {
			src := bytes.Clone(tt.data)
			n := newNode(tt.name, src, kind, nil, 5, 6)
			if len(src) > 0 {
				src[0]++ // the node keeps a copy
			}
			check := func(when string, data []byte) {
				t.Helper()
				if n.name() != tt.name || n.kind() != kind {
					t.Fatalf("%s %q/%d: name %q kind %d", when, tt.name, kind, n.name(), n.kind())
				}
				got := n.data()
				if (got == nil) != (data == nil) || !bytes.Equal(got, data) || n.dataLen() != len(data) {
					t.Fatalf("%s %q/%d: data %v (nil %v, len %d); want %v (nil %v)",
						when, tt.name, kind, got, got == nil, n.dataLen(), data, data == nil)
				}
				if st := n.stat(); st.DataLength != int32(len(data)) || st.Czxid != 5 || st.Mzxid != 5 || st.Pzxid != 5 || st.Mtime != 6 {
					t.Fatalf("%s %q/%d: stat %+v", when, tt.name, kind, st)
				}
			}
			check("new", tt.data)
			if kind != kindPersistent { // a restored node gets its kind after its bytes
				n = newNode(tt.name, tt.data, kindPersistent, nil, 5, 6)
				n.setKind(kind)
				check("setKind", tt.data)
			}
			n.setData([]byte("other"))
			check("setData", []byte("other"))
			n.setData(nil)
			check("setData(nil)", nil)
		}
	}
}

// Fields out of line take their defaults from czxid and ctime until first set, and a node's
// nodeExt is replaced, never changed, so a View holding the old node sees the old values.
func TestNodeExtDefaults(t *testing.T) {
	n := newNode("n", nil, kindPersistent, nil, 10, 20)
	if n.x != nil {
		t.Fatal("a new node has a nodeExt")
	}
	want := jute.Stat{Czxid: 10, Mzxid: 10, Pzxid: 10, Ctime: 20, Mtime: 20}
	if st := n.stat(); st != want {
		t.Fatalf("stat %+v; want %+v", st, want)
	}
	old := *n
	x := n.ext()
	x.mzxid, x.mtime, x.cversion = 11, 21, 1
	n.x = x
	if st := old.stat(); st != want {
		t.Fatalf("the old node changed: %+v", st)
	}
	if st := n.stat(); st.Mzxid != 11 || st.Mtime != 21 || st.Pzxid != 10 || st.Cversion != 2 {
		t.Fatalf("stat %+v", st)
	}
	n.setExt(nodeExt{mzxid: 10, mtime: 20, pzxid: 10})
	if n.x != nil {
		t.Fatal("setExt with the defaults kept a nodeExt")
	}
}
