package znode

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
)

// Quotas, as ZooKeeper's DataTree keeps them.
//
// A quota root Q exists while the node /zookeeper/quota + Q + /zookeeper_limits exists (clients
// create it, zkCli's setquota for example). The tree keeps the set of quota roots in View.quotas;
// it is derived from the nodes, so ReadSnapshot rebuilds it from the /zookeeper/quota subtree and
// the snapshot format does not carry it.
//
// Every create, delete and setData of a node P charges the longest quota root that is P or an
// ancestor of P by whole path segments (Q=/a covers /a and /a/b, never /ab; the root "/" is never
// a quota root): the text of /zookeeper/quota + Q + /zookeeper_stats, "count=N,bytes=M", gets
// count±1 and bytes±len(data) on create and delete, and bytes+(new-old) on setData. The stats node's
// data is replaced without touching its mzxid, mtime or version and without a watch event, as
// ZooKeeper does. The data size counter (DataSize) does follow the new length, so that a restored
// tree, which recounts it from the nodes, agrees with the live one (ZooKeeper's cached
// approximate_data_size drifts here until its next restart).
//
// Creating a zookeeper_stats node under /zookeeper/quota/... overwrites its data with the current
// count and bytes of the whole subtree at Q (Q itself included), whatever the client sent. This
// happens before the create itself is charged, so the order of effects is ZooKeeper's. A
// zookeeper_limits or zookeeper_stats node directly under /zookeeper/quota (an empty Q) is ignored.
//
// ZooKeeper also recomputes every stats node from the subtrees when it loads a snapshot at start;
// zkd does not, because a replica that restores a snapshot must end up byte-identical to one that
// applied the transactions. The two differ only when the stats text had drifted from the subtree
// (nested quota roots, or a client that rewrote the stats node).
//
// Limits are never enforced: ZooKeeper only logs when a soft limit is passed, and its hard limits
// (countHardLimit, byteHardLimit) take effect only with enforceQuota=true, which is off by default.
// Enforcing them would mean refusing the write with QuotaExceeded (-125) before it is applied, in
// create after the ephemeral-parent check and in setData before the version check.

const (
	quotaLimitsName = "zookeeper_limits"
	quotaStatsName  = "zookeeper_stats"
)

// quotaRootOf returns the quota root that a zookeeper_limits or zookeeper_stats child of
// parentPath stands for: parentPath without its /zookeeper/quota prefix. ok is false when
// parentPath is not strictly under /zookeeper/quota.
func quotaRootOf(parentPath string) (string, bool) {
	if len(parentPath) <= len(quotaPath)+1 || !strings.HasPrefix(parentPath, quotaPath) || parentPath[len(quotaPath)] != '/' {
		return "", false
	}
	return parentPath[len(quotaPath):], true
}

// quotaStatsPath is the path of the stats node of quota root q.
func quotaStatsPath(q string) string {
	return quotaPath + q + "/" + quotaStatsName
}

// quotaRootFor returns the longest quota root that covers path, or "" when none does.
func (v *View) quotaRootFor(path string) string {
	if v.quotas.empty() {
		return ""
	}
	for p := path; len(p) > 1; p = p[:strings.LastIndexByte(p, '/')] {
		if _, ok := v.quotas.get(p); ok {
			return p
		}
	}
	return ""
}

// quotaCreated does the quota work of a create of path (its parent and last segment given) with
// size bytes of data, after the node is in the working tree.
func (a *applier) quotaCreated(path, parentPath, name string, size int) {
	if name == quotaLimitsName || name == quotaStatsName {
		if q, ok := quotaRootOf(parentPath); ok {
			if name == quotaLimitsName {
				a.v.quotas, _ = a.v.quotas.set(pathKey(q))
			} else {
				a.recountQuota(q)
			}
		}
	}
	a.chargeQuota(path, int64(size), 1)
}

// quotaRemoved does the quota work of deleting the node at path, which held size bytes of data,
// after it left the working tree.
func (a *applier) quotaRemoved(path, parentPath, name string, size int) {
	if name == quotaLimitsName {
		if q, ok := quotaRootOf(parentPath); ok {
			a.v.quotas, _ = a.v.quotas.delete(q)
		}
	}
	a.chargeQuota(path, -int64(size), -1)
}

// chargeQuota adds size and count to the stats of the quota root covering path, if there is one
// and its stats node exists.
func (a *applier) chargeQuota(path string, size, count int64) {
	q := a.v.quotaRootFor(path)
	if q == "" {
		return
	}
	sp := quotaStatsPath(q)
	n := a.v.lookup(sp)
	if n == nil {
		return // ZooKeeper logs the missing stats node and goes on
	}
	st := parseQuotaStats(n.data())
	st.count += count
	st.bytes += size
	a.setQuotaStats(sp, n, st.appendText(nil))
}

// recountQuota sets the stats node of quota root q to the count and data bytes of the subtree at q
// (zero and zero when q does not exist).
func (a *applier) recountQuota(q string) {
	sp := quotaStatsPath(q)
	n := a.v.lookup(sp)
	if n == nil {
		return
	}
	st := quotaStats{count: 0, bytes: 0}
	if r := a.v.lookup(q); r != nil {
		var walk func(*node) bool
		walk = func(x *node) bool {
			st.count++
			st.bytes += int64(x.dataLen())
			return x.kids.ascend(walk)
		}
		walk(r)
	}
	a.setQuotaStats(sp, n, st.appendText(nil))
}

// setQuotaStats replaces the data of the stats node n at path with text, keeping its Stat fields:
// no version, mzxid or mtime change and no event.
func (a *applier) setQuotaStats(path string, n *node, text []byte) {
	if bytes.Equal(n.data(), text) {
		return
	}
	grew := int64(len(text) - n.dataLen()) // before rewrite, which may change n in place
	a.rewrite(path, func(p *node) *node {
		c := a.own(p)
		c.setData(text)
		return c
	})
	a.v.dataSize += grew
}

// quotaStats is the content of a stats (or limits) node: ZooKeeper's StatsTrack. A missing count
// or bytes reads as -1.
type quotaStats struct {
	count, bytes int64
	extra        []quotaField // other fields, sorted by key, each key once
}

type quotaField struct {
	key   string
	value int64
}

// parseQuotaStats reads the "key=value" pairs of data, separated by runs of ',' or ';'. It follows
// StatsTrack, where a later pair wins over an earlier one with the same key and an empty value
// reads as -1 (so "count=1,bytes=5=;countHardLimit=10" has bytes 5 and the extra field
// countHardLimit). Where ZooKeeper would throw on the apply path (a pair without a value, a value
// that is not a decimal integer), the pair is skipped instead, so bad text never fails a write.
func parseQuotaStats(data []byte) quotaStats {
	st := quotaStats{count: -1, bytes: -1}
	s := string(data)
	for s != "" {
		i := strings.IndexAny(s, ",;")
		pair := s
		if i >= 0 {
			pair, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		if pair == "" {
			continue
		}
		// Java's split("=") drops trailing empty strings, so "bytes=5=" is bytes 5, "count==5" has
		// an empty value (read as -1), and "count=" or "=" has no value at all (ZooKeeper throws).
		key, rest, ok := strings.Cut(strings.TrimRight(pair, "="), "=")
		if !ok {
			continue
		}
		val, _, _ := strings.Cut(rest, "=")
		var v int64 = -1
		if val != "" {
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				continue
			}
			v = n
		}
		switch key {
		case "count":
			st.count = v
		case "bytes":
			st.bytes = v
		default:
			j, found := slices.BinarySearchFunc(st.extra, key, func(f quotaField, k string) int { return strings.Compare(f.key, k) })
			if found {
				st.extra[j].value = v
			} else {
				st.extra = slices.Insert(st.extra, j, quotaField{key: key, value: v})
			}
		}
	}
	return st
}

// appendText appends the stats in ZooKeeper's format: "count=N,bytes=M", and when there are other
// fields, "=" and then ";key=value" for each in key order.
func (st quotaStats) appendText(b []byte) []byte {
	b = append(b, "count="...)
	b = strconv.AppendInt(b, st.count, 10)
	b = append(b, ",bytes="...)
	b = strconv.AppendInt(b, st.bytes, 10)
	if len(st.extra) > 0 {
		b = append(b, '=')
		for _, f := range st.extra {
			b = append(b, ';')
			b = append(b, f.key...)
			b = append(b, '=')
			b = strconv.AppendInt(b, f.value, 10)
		}
	}
	return b
}

// Quota is a quota root with its limits and usage as the tree holds them, read the way
// ZooKeeper's StatsTrack reads them: a field that is missing (or a node that is missing) is -1.
type Quota struct {
	// Path is the quota root: the node whose subtree the quota covers.
	Path string
	// CountLimit and BytesLimit are the soft limits ("count" and "bytes" of zookeeper_limits).
	CountLimit, BytesLimit int64
	// CountHardLimit and BytesHardLimit are "countHardLimit" and "byteHardLimit" of
	// zookeeper_limits (ZooKeeper 3.7 and later; enforced only with enforceQuota).
	CountHardLimit, BytesHardLimit int64
	// Count and Bytes are the usage recorded in zookeeper_stats.
	Count, Bytes int64
}

// Quotas returns every quota root, sorted by path, with its limits and usage.
func (v *View) Quotas() []Quota {
	var out []Quota
	v.quotas.ascend(func(p pathKey) bool {
		q := Quota{Path: string(p), CountLimit: -1, BytesLimit: -1, CountHardLimit: -1, BytesHardLimit: -1, Count: -1, Bytes: -1}
		if n := v.lookup(quotaPath + q.Path + "/" + quotaLimitsName); n != nil {
			lim := parseQuotaStats(n.data())
			q.CountLimit, q.BytesLimit = lim.count, lim.bytes
			q.CountHardLimit, q.BytesHardLimit = lim.field("countHardLimit"), lim.field("byteHardLimit")
		}
		if n := v.lookup(quotaStatsPath(q.Path)); n != nil {
			st := parseQuotaStats(n.data())
			q.Count, q.Bytes = st.count, st.bytes
		}
		out = append(out, q)
		return true
	})
	return out
}

// field returns the extra field key, or -1.
func (st quotaStats) field(key string) int64 {
	for _, f := range st.extra {
		if f.key == key {
			return f.value
		}
	}
	return -1
}

// collectQuotaRoots lists, sorted, the quota roots the nodes under /zookeeper/quota declare.
func collectQuotaRoots(root *node) []string {
	zk, ok := root.kids.get("zookeeper")
	if !ok {
		return nil
	}
	quota, ok := zk.kids.get("quota")
	if !ok {
		return nil
	}
	var out []string
	var walk func(n *node, path string)
	walk = func(n *node, path string) {
		n.kids.ascend(func(c *node) bool {
			if c.name() == quotaLimitsName && path != quotaPath {
				out = append(out, path[len(quotaPath):])
			}
			walk(c, path+"/"+c.name())
			return true
		})
	}
	walk(quota, quotaPath)
	slices.Sort(out)
	return out
}
