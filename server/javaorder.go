package server

import (
	"sort"
	"unicode/utf16"

	"github.com/zkd-io/zkd/jute"
)

// ZooKeeper keeps a connection's identities in a java.util.HashSet, so whoAmI lists them in that
// set's iteration order: by hash bucket, then by insertion within a bucket. Clients may compare
// the list as a whole, so zkd reproduces the order exactly.

// javaStringHash is java.lang.String.hashCode: over UTF-16 code units, with int overflow.
func javaStringHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// javaIDHash is the jute-generated Id.hashCode of ZooKeeper's Id record.
func javaIDHash(id jute.Id) int32 {
	r := int32(17)
	r = 37*r + javaStringHash(id.Scheme)
	r = 37*r + javaStringHash(id.ID)
	return r
}

// javaHashSetOrder returns ids (in insertion order, without duplicates) in the iteration order of
// a java.util.HashSet they were added to one by one.
func javaHashSetOrder(ids []jute.Id) []jute.Id {
	capacity := 16
	for float64(len(ids)) > 0.75*float64(capacity) {
		capacity *= 2
	}
	type entry struct {
		id     jute.Id
		bucket uint32
		pos    int
	}
	es := make([]entry, len(ids))
	for i, id := range ids {
		h := uint32(javaIDHash(id))
		es[i] = entry{id: id, bucket: (h ^ h>>16) & uint32(capacity-1), pos: i}
	}
	sort.SliceStable(es, func(i, j int) bool { return es[i].bucket < es[j].bucket })
	out := make([]jute.Id, len(es))
	for i, e := range es {
		out[i] = e.id
	}
	return out
}
