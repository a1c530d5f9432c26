package consensus

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// hclog.Fmt arguments come out formatted, in text and JSON alike (raft logs its configuration
// with one: it used to read servers="[%+v [...]]").
func TestHclogBridgeFormats(t *testing.T) {
	servers := []struct{ ID string }{{"1"}, {"2"}}
	var text, js bytes.Buffer
	newHclog(slog.New(slog.NewTextHandler(&text, nil)), "raft").Info("initial configuration", "servers", hclog.Fmt("%+v", servers))
	newHclog(slog.New(slog.NewJSONHandler(&js, nil)), "raft").Info("initial configuration", "servers", hclog.Fmt("%+v", servers))
	if !strings.Contains(text.String(), `servers="[{ID:1} {ID:2}]"`) {
		t.Errorf("text: %s", text.String())
	}
	var rec map[string]any
	if err := json.Unmarshal(js.Bytes(), &rec); err != nil || rec["servers"] != "[{ID:1} {ID:2}]" {
		t.Errorf("json: %s (%v)", js.String(), err)
	}
}

// A standalone node's first election is not worth a warning; a cluster member's is.
func TestHclogBridgeStandaloneElection(t *testing.T) {
	for _, alone := range []bool{true, false} {
		var out bytes.Buffer
		b := newHclog(slog.New(slog.NewTextHandler(&out, nil)), "raft")
		b.(*hclogBridge).alone = alone
		b.Named("x").Warn(electionStart, "last-leader-id", "")
		want := "level=WARN"
		if alone {
			want = "level=INFO"
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("alone=%v: %s; want %s", alone, out.String(), want)
		}
	}
}
