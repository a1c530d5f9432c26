package server

import (
	"cmp"
	"encoding/binary"
	"errors"
	"slices"
	"sync"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// A large getChildren reply (a busy lock directory, a node with a million children) is not built
// before it is sent. The reply is queued as a stream (outStream) that holds the child list of the
// view it was read from, and the connection's writer encodes it a chunk at a time as the socket
// takes it (out.go). What a reply costs the server while it waits for its client is then the
// list's handle, not its bytes: 10,000 lock contenders each waiting for a 190 KB listing held
// gigabytes when the replies were built first.

// streamMinChildren is the smallest child list a reply streams; a shorter one is encoded into the
// queue like any reply (a few kilobytes at most, for names of ordinary length).
const streamMinChildren = 512

// streamChunk is the most bytes of a stream encoded at once, into a buffer borrowed from
// streamBufs for that one write.
const streamChunk = 32 << 10

var streamBufs = sync.Pool{New: func() any { b := make([]byte, 0, streamChunk); return &b }}

// streamMark is a name of a child list and the frame offset where it begins. A childStream's next
// notes every markEvery-th name of its chunk (in a slice borrowed from streamMarks until advance),
// so that advance after a partial write finds the first name not wholly written by walking a few
// names, not the whole chunk.
type streamMark struct {
	name string
	at   int
}

const markEvery = 16

var streamMarks = sync.Pool{New: func() any { m := make([]streamMark, 0, streamChunk/markEvery/8); return &m }}

// outStream is a reply frame encoded while it is written. next appends up to limit of its bytes
// from where the last advance left it; advance records that n of those bytes were written.
type outStream interface {
	remaining() int
	next(dst []byte, limit int) []byte
	advance(n int)
}

// childrenReply is the body of a getChildren or getChildren2 reply, read straight from the view's
// node: it encodes as jute.GetChildrenResponse does (jute.GetChildren2Response with stat), and a
// long list is queued as a childStream instead of being encoded at once (outQueue.pushReply).
type childrenReply struct {
	kids znode.Children
	stat *jute.Stat // getChildren2's; nil for getChildren
}

// Encode appends the reply body to e.
func (r *childrenReply) Encode(e *jute.Encoder) {
	e.Int32(int32(r.kids.Len()))
	for name := range r.kids.From("") {
		e.String(name)
	}
	if r.stat != nil {
		r.stat.Encode(e)
	}
}

// Decode is never used: replies are only encoded by the server.
func (r *childrenReply) Decode(d *jute.Decoder) {
	d.Fail(errors.New("server: a children reply is not decoded"))
}

// stream returns r, under reply header h, as a stream, or nil if the list is short enough to
// encode at once.
func (r *childrenReply) stream(h *jute.ReplyHeader) *childStream {
	if r.kids.Len() < streamMinChildren {
		return nil
	}
	names := 4 + 4*r.kids.Len() + r.kids.NameBytes()
	var tail []byte
	if r.stat != nil {
		tail = jute.AppendFrame(nil, r.stat)[jute.FrameHeaderLen:]
	}
	head := jute.AppendFrame(nil, h)
	body := len(head) - jute.FrameHeaderLen + names + len(tail)
	binary.BigEndian.PutUint32(head, uint32(body))
	head = binary.BigEndian.AppendUint32(head, uint32(r.kids.Len()))
	s := &childStream{head: head, tail: tail, kids: r.kids, size: jute.FrameHeaderLen + body}
	s.markAt = len(head)
	s.done = r.kids.Len() == 0
	return s
}

// childStream is a children reply frame as a stream: head (the frame's length, the reply header
// and the name count), the names, then tail (getChildren2's Stat).
type childStream struct {
	head, tail []byte
	kids       znode.Children
	size       int // the whole frame
	pos        int // bytes written so far
	// mark is the first name not yet wholly written, which begins at frame offset markAt; done
	// is set once every name is.
	mark   string
	markAt int
	done   bool
	// The mark after the bytes the last next returned, should all of them be written.
	endPos    int
	endMark   string
	endMarkAt int
	endDone   bool
	marks     *[]streamMark // names of the last chunk, from next until advance
}

func (s *childStream) remaining() int { return s.size - s.pos }

// namesEnd is the frame offset where the names end and tail begins.
func (s *childStream) namesEnd() int { return s.size - len(s.tail) }

func (s *childStream) next(dst []byte, limit int) []byte {
	end := min(s.pos+limit, s.size)
	off := s.pos
	if off < len(s.head) {
		n := min(end, len(s.head))
		dst = append(dst, s.head[off:n]...)
		off = n
	}
	s.endPos, s.endMark, s.endMarkAt, s.endDone = end, s.mark, s.markAt, s.done
	if nend := min(end, s.namesEnd()); off < nend && !s.done {
		at := s.markAt
		s.endDone = true
		if s.marks == nil {
			s.marks = streamMarks.Get().(*[]streamMark)
		}
		marks := (*s.marks)[:0]
		i := 0
		for name := range s.kids.From(s.mark) {
			if i%markEvery == 0 {
				marks = append(marks, streamMark{name, at})
			}
			i++
			rec := 4 + len(name)
			if at+rec > end {
				s.endMark, s.endMarkAt, s.endDone = name, at, false
			}
			if at >= nend {
				break
			}
			dst = appendNamePart(dst, name, max(off, at)-at, min(nend, at+rec)-at)
			at += rec
			if !s.endDone {
				break
			}
		}
		if s.endDone {
			s.endMarkAt = at
		}
		*s.marks = marks
		off = nend
	}
	if off < end {
		base := s.namesEnd()
		dst = append(dst, s.tail[off-base:end-base]...)
	}
	return dst
}

// appendNamePart appends bytes [lo, hi) of name's encoding (its length, then its bytes).
func appendNamePart(dst []byte, name string, lo, hi int) []byte {
	if lo == 0 && hi == 4+len(name) {
		return jute.AppendString(dst, name)
	}
	var l [4]byte
	binary.BigEndian.PutUint32(l[:], uint32(len(name)))
	if lo < 4 {
		dst = append(dst, l[lo:min(hi, 4)]...)
		lo = 4
	}
	if lo < hi {
		dst = append(dst, name[lo-4:hi-4]...)
	}
	return dst
}

func (s *childStream) advance(n int) {
	s.pos += n
	s.moveMark()
	if s.marks != nil {
		clear(*s.marks)
		streamMarks.Put(s.marks)
		s.marks = nil
	}
}

// moveMark moves the mark to the first name not wholly written once pos has moved.
func (s *childStream) moveMark() {
	if s.pos == s.endPos {
		s.mark, s.markAt, s.done = s.endMark, s.endMarkAt, s.endDone
		return
	}
	if s.done || s.pos <= s.markAt {
		return
	}
	upto := min(s.pos, s.namesEnd())
	if s.marks != nil {
		// Walk from the last name next noted that begins at or before upto.
		marks := *s.marks
		if i, _ := slices.BinarySearchFunc(marks, upto+1, func(m streamMark, at int) int { return cmp.Compare(m.at, at) }); i > 0 {
			s.mark, s.markAt = marks[i-1].name, marks[i-1].at
		}
	}
	at := s.markAt
	for name := range s.kids.From(s.mark) {
		rec := 4 + len(name)
		if at+rec > upto {
			s.mark, s.markAt = name, at
			return
		}
		at += rec
	}
	s.markAt, s.done = at, true
}
