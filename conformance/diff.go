package conformance

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// Step is one request of a differential script. Req builds the request for a run whose nodes
// live under base, so two runs (on two servers, or twice on one) never share paths.
type Step struct {
	Name string
	Op   jute.Op
	Req  func(base string) jute.Record
}

// Script is a named sequence of requests sent on one session.
type Script struct {
	Name  string
	Steps []Step
}

// Field is one normalised value of an observation, named by its place in the reply
// (for example "body.Stat.Version").
type Field struct {
	Name  string
	Value string
}

// Observation is what one step produced: the normalised reply header and body, preceded by the
// notifications that arrived before the reply.
type Observation struct {
	Step   string
	Fields []Field
}

// RunScript runs s on a new session at addr with its nodes under base, which must exist, and
// returns one normalised observation per step. Zxids are replaced by the order in which they first
// appear, set times by "t", session ids by "session", and base by "{base}", so runs on different servers
// compare equal when the servers behave the same. Notification header zxids are left out: ZooKeeper
// 3.8 sends -1 and 3.9 the txn zxid.
func RunScript(addr, base string, s Script) ([]Observation, error) {
	r, err := DialRaw(addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if err := r.NewSession(10000); err != nil {
		return nil, err
	}
	n := &normalizer{base: base, session: r.Session.SessionID, zxids: map[int64]int{}}
	var obs []Observation
	for _, st := range s.Steps {
		rep, err := r.Call(st.Op, st.Req(base))
		if err != nil {
			return obs, fmt.Errorf("conformance: script %s step %s: %w", s.Name, st.Name, err)
		}
		o := Observation{Step: st.Name}
		for i, ev := range r.Events {
			we, err := ev.Event()
			if err != nil {
				return obs, err
			}
			p := "event" + strconv.Itoa(i) + "."
			o.Fields = append(o.Fields,
				Field{p + "Type", we.Type.String()}, Field{p + "State", we.State.String()}, Field{p + "Path", n.path(we.Path)})
		}
		r.Events = nil
		o.Fields = append(o.Fields,
			Field{"header.Err", strconv.Itoa(int(rep.Header.Err))},
			Field{"header.Zxid", n.zxid(rep.Header.Zxid)},
		)
		if rep.Header.Err == jute.CodeOK || (st.Op == jute.OpMultiRead && len(rep.Body) > 0) {
			resp := jute.NewResponse(st.Op)
			if resp == nil {
				if len(rep.Body) != 0 {
					o.Fields = append(o.Fields, Field{"body", fmt.Sprintf("%d unexpected bytes", len(rep.Body))})
				}
			} else if err := rep.Decode(resp); err != nil {
				o.Fields = append(o.Fields, Field{"body", "undecodable: " + err.Error()})
			} else {
				n.flatten("body", reflect.ValueOf(resp), &o.Fields)
			}
		} else if len(rep.Body) != 0 {
			o.Fields = append(o.Fields, Field{"body", fmt.Sprintf("%d bytes after an error header", len(rep.Body))})
		}
		obs = append(obs, o)
	}
	return obs, nil
}

// Diff compares two runs of one script and returns one readable line per difference, naming the
// step and the field; nil means the runs agree.
func Diff(nameA string, a []Observation, nameB string, b []Observation) []string {
	var out []string
	for i := 0; i < len(a) || i < len(b); i++ {
		switch {
		case i >= len(a):
			out = append(out, fmt.Sprintf("step %d %s: only %s ran it", i, b[i].Step, nameB))
			continue
		case i >= len(b):
			out = append(out, fmt.Sprintf("step %d %s: only %s ran it", i, a[i].Step, nameA))
			continue
		}
		fa, fb := fieldMap(a[i].Fields), fieldMap(b[i].Fields)
		for _, f := range mergedNames(a[i].Fields, b[i].Fields) {
			va, okA := fa[f]
			vb, okB := fb[f]
			if !okA {
				va = "(absent)"
			}
			if !okB {
				vb = "(absent)"
			}
			if va != vb {
				out = append(out, fmt.Sprintf("step %d %s: %s: %s=%s %s=%s", i, a[i].Step, f, nameA, va, nameB, vb))
			}
		}
	}
	return out
}

func fieldMap(fs []Field) map[string]string {
	m := make(map[string]string, len(fs))
	for _, f := range fs {
		m[f.Name] = f.Value
	}
	return m
}

// mergedNames lists the field names of a, then those only b has, in order.
func mergedNames(a, b []Field) []string {
	seen := map[string]bool{}
	var names []string
	for _, fs := range [][]Field{a, b} {
		for _, f := range fs {
			if !seen[f.Name] {
				seen[f.Name] = true
				names = append(names, f.Name)
			}
		}
	}
	return names
}

// normalizer replaces run-specific values by stable labels.
type normalizer struct {
	base    string
	session int64
	zxids   map[int64]int
}

func (n *normalizer) zxid(z int64) string {
	if z <= 0 {
		return strconv.FormatInt(z, 10)
	}
	if _, ok := n.zxids[z]; !ok {
		n.zxids[z] = len(n.zxids) + 1
	}
	return "z" + strconv.Itoa(n.zxids[z])
}

// time hides a wall-clock time: two runs cannot agree on milliseconds, only on whether a time
// was set.
func (n *normalizer) time(t int64) string {
	if t <= 0 {
		return strconv.FormatInt(t, 10)
	}
	return "t"
}

func (n *normalizer) path(s string) string {
	if n.base != "" && strings.HasPrefix(s, n.base) {
		return "{base}" + strings.TrimPrefix(s, n.base)
	}
	return s
}

// flatten appends the fields of v (a record, possibly nested) under name.
func (n *normalizer) flatten(name string, v reflect.Value, out *[]Field) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			*out = append(*out, Field{name, "nil"})
			return
		}
		n.flatten(name, v.Elem(), out)
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			if !t.Field(i).IsExported() {
				continue
			}
			n.flatten(name+"."+t.Field(i).Name, v.Field(i), out)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if v.IsNil() {
				*out = append(*out, Field{name, "null"})
			} else {
				*out = append(*out, Field{name, strconv.Quote(string(v.Bytes()))})
			}
			return
		}
		*out = append(*out, Field{name + ".len", strconv.Itoa(v.Len())})
		if v.Type().Elem().Kind() == reflect.String && (strings.HasSuffix(name, "Children") || strings.HasSuffix(name, "Ephemerals")) {
			// ZooKeeper lists children and ephemerals in no set order.
			names := make([]string, v.Len())
			for i := range names {
				names[i] = v.Index(i).String()
			}
			slices.Sort(names)
			v = reflect.ValueOf(names)
		}
		for i := range v.Len() {
			n.flatten(name+"["+strconv.Itoa(i)+"]", v.Index(i), out)
		}
	case reflect.String:
		*out = append(*out, Field{name, strconv.Quote(n.path(v.String()))})
	case reflect.Int64:
		x := v.Int()
		switch {
		case strings.HasSuffix(name, "zxid") || strings.HasSuffix(name, "Zxid"):
			*out = append(*out, Field{name, n.zxid(x)})
		case strings.HasSuffix(name, "time"):
			*out = append(*out, Field{name, n.time(x)})
		case strings.HasSuffix(name, "EphemeralOwner") && x == n.session:
			*out = append(*out, Field{name, "session"})
		case strings.HasSuffix(name, "EphemeralOwner") && x != 0:
			*out = append(*out, Field{name, "other session"})
		default:
			*out = append(*out, Field{name, strconv.FormatInt(x, 10)})
		}
	default:
		*out = append(*out, Field{name, fmt.Sprint(v.Interface())})
	}
}
