package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/zkd-io/zkd/jute"
)

// create creates path with data and mode and open ACLs.
func create(c *client, path string, data []byte, mode jute.CreateMode) error {
	r := c.call(jute.OpCreate, &jute.CreateRequest{Path: path, Data: data, ACL: openACL, Flags: mode})
	if err := r.result(); err != nil {
		return fmt.Errorf("zkbench: create %s: %w", path, err)
	}
	return nil
}

// ensurePath creates every missing node of path (which must be absolute).
func ensurePath(c *client, path string) error {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	p := ""
	for _, part := range parts {
		p += "/" + part
		if err := create(c, p, nil, jute.ModePersistent); err != nil && !errors.Is(err, jute.CodeNodeExists) {
			return err
		}
	}
	return nil
}

// children lists path's children.
func children(c *client, path string) ([]string, error) {
	r := c.call(jute.OpGetChildren, &jute.GetChildrenRequest{Path: path})
	if err := r.result(); err != nil {
		return nil, fmt.Errorf("zkbench: getChildren %s: %w", path, err)
	}
	resp, ok := r.body.(*jute.GetChildrenResponse)
	if !ok {
		return nil, fmt.Errorf("zkbench: getChildren %s: no body: %w", path, errProtocol)
	}
	return resp.Children, nil
}

// batchSize is how many ops setup and cleanup put into one multi.
const batchSize = 100

// batchBytes is roughly how many bytes of data one setup multi may carry, well below
// ZooKeeper's default jute.maxbuffer of 1 MiB.
const batchBytes = 256 << 10

// opBytes estimates the encoded size of one multi op.
func opBytes(op jute.MultiOp) int {
	switch r := op.Req.(type) {
	case *jute.CreateRequest:
		return len(r.Path) + len(r.Data) + 64
	case *jute.SetDataRequest:
		return len(r.Path) + len(r.Data) + 32
	case *jute.DeleteRequest:
		return len(r.Path) + 32
	}
	return 64
}

// pipelineDepth is how many multis setup and cleanup keep outstanding on one connection.
const pipelineDepth = 16

// multiBatches sends ops in multis of batchSize, pipelineDepth at a time, and returns the first
// error.
func multiBatches(c *client, ops []jute.MultiOp) error {
	sem := make(chan struct{}, pipelineDepth)
	errs := make(chan error, len(ops))
	n := 0
	for start := 0; start < len(ops); {
		end, bytes := start, 0
		for end < len(ops) && end-start < batchSize && (end == start || bytes < batchBytes) {
			bytes += opBytes(ops[end])
			end++
		}
		batch := ops[start:end]
		start = end
		sem <- struct{}{}
		n++
		c.send(jute.OpMulti, &jute.MultiRequest{Ops: batch}, func(r reply) {
			errs <- r.multiResult()
			<-sem
		})
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return fmt.Errorf("zkbench: multi: %w", first)
	}
	return nil
}

// createMany creates the nodes paths with data, in pipelined multis.
func createMany(c *client, paths []string, data []byte) error {
	ops := make([]jute.MultiOp, len(paths))
	for i, p := range paths {
		ops[i] = jute.MultiOp{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: p, Data: data, ACL: openACL, Flags: jute.ModePersistent}}
	}
	return multiBatches(c, ops)
}

// removeTree deletes path and everything below it. The trees zkbench makes are flat, so the
// children are first deleted as leaves in pipelined multis; only if that finds a non-empty child
// does it fall back to walking each child.
func removeTree(c *client, path string) error {
	kids, err := children(c, path)
	if errors.Is(err, jute.CodeNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	ops := make([]jute.MultiOp, len(kids))
	for i, k := range kids {
		ops[i] = jute.MultiOp{Type: jute.OpDelete, Req: &jute.DeleteRequest{Path: path + "/" + k, Version: -1}}
	}
	if err := multiBatches(c, ops); err != nil {
		if !errors.Is(err, jute.CodeNotEmpty) && !errors.Is(err, jute.CodeNoNode) {
			return err
		}
		for _, k := range kids {
			if err := removeTree(c, path+"/"+k); err != nil {
				return err
			}
		}
	}
	r := c.call(jute.OpDelete, &jute.DeleteRequest{Path: path, Version: -1})
	if err := r.result(); err != nil && !errors.Is(err, jute.CodeNoNode) {
		return fmt.Errorf("zkbench: delete %s: %w", path, err)
	}
	return nil
}
