package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// The replicated floor: the least a three-node server does for a write beyond what the
// standalone floor does. Node 1 sends every batch it logs to each other node as one frame (a
// sequence number, a length, the batch's log record) before its own write and fdatasync; a node
// writes the frame's record to its log, fdatasyncs and answers with the sequence number. Node 1
// answers the batch's clients once its own log and enough others to make a majority have it.
// Batches go one at a time, as the standalone floor's do, so the next batch gathers while one is
// being made durable. The other nodes serve no clients and keep no tree, and there is no
// election: the floor leaves out everything a real cluster needs beyond moving and syncing the
// bytes, so that what it reaches bounds what a replicated server can reach on the machine.

// floorFrameHead is a replication frame's header: the batch's sequence number and the record's
// length, both big-endian.
const floorFrameHead = 12

// floorMaxRecord bounds a frame's record, so that a damaged stream is an error rather than an
// allocation of whatever its length field says.
const floorMaxRecord = 64 << 20

// floorReplicas is node 1's side of replication: a connection to each other node and the last
// sequence number each has made durable.
type floorReplicas struct {
	peers []*floorPeer
	need  int           // acknowledgements that make a majority with node 1's own log
	acked chan struct{} // a peer acknowledged something (capacity 1: a wake-up, not a count)
	seq   int64
	buf   []byte
	done  chan struct{} // closed once every ack reader has returned
	alive atomic.Int32  // peers not failed
	stop  context.CancelFunc
	log   io.Writer
}

type floorPeer struct {
	nc     net.Conn
	acked  atomic.Int64
	failed atomic.Bool
}

// fail leaves p out, once, and stops node 1 if a majority can no longer be made.
func (r *floorReplicas) fail(p *floorPeer, err error) {
	if p.failed.Swap(true) {
		return
	}
	_ = p.nc.Close()
	fmt.Fprintf(r.log, "zkbench floor: node at %s: %v\n", p.nc.RemoteAddr(), err)
	if int(r.alive.Add(-1)) < r.need {
		r.stop()
	}
}

// dialReplicas connects to the other nodes, waiting for each to listen (they may start after
// node 1) until ctx ends or a minute passes, and starts a reader of each one's acknowledgements.
// A peer that fails is left out from then on; when too few are left to make a majority, stop is
// called: node 1 gives up rather than answer writes only it has.
func dialReplicas(ctx context.Context, stop context.CancelFunc, addrs []string, log io.Writer) (*floorReplicas, error) {
	r := &floorReplicas{need: (len(addrs) + 1) / 2, acked: make(chan struct{}, 1), done: make(chan struct{})}
	deadline := time.Now().Add(time.Minute)
	for _, a := range addrs {
		var d net.Dialer
		for {
			nc, err := d.DialContext(ctx, "tcp", a)
			if err == nil {
				r.peers = append(r.peers, &floorPeer{nc: nc})
				break
			}
			if ctx.Err() != nil || time.Now().After(deadline) {
				for _, p := range r.peers { // no reader runs yet: close is for later
					_ = p.nc.Close()
				}
				return nil, fmt.Errorf("zkbench floor: node at %s: %w", a, err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	r.alive.Store(int32(len(r.peers)))
	r.stop, r.log = stop, log
	left := atomic.Int32{}
	left.Store(int32(len(r.peers)))
	for _, p := range r.peers {
		go func() {
			defer func() {
				if left.Add(-1) == 0 {
					close(r.done)
				}
			}()
			var b [8]byte
			for {
				if _, err := io.ReadFull(p.nc, b[:]); err != nil {
					if ctx.Err() == nil {
						r.fail(p, err)
					}
					return
				}
				p.acked.Store(int64(binary.BigEndian.Uint64(b[:])))
				select {
				case r.acked <- struct{}{}:
				default:
				}
			}
		}()
	}
	return r, nil
}

// send writes rec to every peer left as the next batch and returns its sequence number.
func (r *floorReplicas) send(rec []byte) (int64, error) {
	r.seq++
	r.buf = binary.BigEndian.AppendUint64(r.buf[:0], uint64(r.seq))
	r.buf = binary.BigEndian.AppendUint32(r.buf, uint32(len(rec)))
	r.buf = append(r.buf, rec...)
	for _, p := range r.peers {
		if p.failed.Load() {
			continue
		}
		if _, err := p.nc.Write(r.buf); err != nil {
			r.fail(p, err)
		}
	}
	if int(r.alive.Load()) < r.need {
		return 0, errors.New("too few nodes left for a majority")
	}
	return r.seq, nil
}

// wait returns once enough peers have made batch seq durable, or false if ctx ended first.
func (r *floorReplicas) wait(ctx context.Context, seq int64) bool {
	for {
		n := 0
		for _, p := range r.peers {
			if p.acked.Load() >= seq {
				n++
			}
		}
		if n >= r.need {
			return true
		}
		select {
		case <-r.acked:
		case <-ctx.Done():
			return false
		}
	}
}

// close closes the connections and waits for the ack readers to return.
func (r *floorReplicas) close() {
	for _, p := range r.peers {
		_ = p.nc.Close()
	}
	if len(r.peers) > 0 {
		<-r.done
	}
}

// follow is a node other than node 1: it takes node 1's connection on ln and logs every batch
// it sends, acknowledging each once it is durable, until ctx ends or node 1 goes away.
func (s *floorServer) follow(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	nc, err := ln.Accept()
	_ = ln.Close()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer nc.Close()
	stopConn := context.AfterFunc(ctx, func() { _ = nc.Close() })
	defer stopConn()
	var head [floorFrameHead]byte
	var rec []byte
	for {
		if _, err := io.ReadFull(nc, head[:]); err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n := binary.BigEndian.Uint32(head[8:])
		if n > floorMaxRecord {
			return fmt.Errorf("zkbench floor: a batch of %d bytes", n)
		}
		if cap(rec) < int(n) {
			rec = make([]byte, n)
		}
		rec = rec[:n]
		if _, err := io.ReadFull(nc, rec); err != nil {
			return err
		}
		if err := s.logBatch(rec); err != nil {
			return err
		}
		if _, err := nc.Write(head[:8]); err != nil {
			return err
		}
	}
}
