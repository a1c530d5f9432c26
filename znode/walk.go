package znode

import "github.com/zkd-io/zkd/jute"

// Walk calls fn for every node of the view in pre-order, children in name order, without ACL
// checks (for tools that inspect a data directory). fn's error stops the walk and is returned.
func (v *View) Walk(fn func(path string, data []byte, st jute.Stat) error) error {
	return v.walk(func(path string, n *node) error { return fn(path, n.data(), n.stat()) })
}

// walk calls fn for every node in pre-order, children in name order; fn's error stops it.
func (v *View) walk(fn func(path string, n *node) error) error {
	var walk func(path string, n *node) error
	walk = func(path string, n *node) error {
		if err := fn(path, n); err != nil {
			return err
		}
		var err error
		n.kids.ascend(func(c *node) bool {
			p := path + "/" + c.name()
			if path == "/" {
				p = "/" + c.name()
			}
			err = walk(p, c)
			return err == nil
		})
		return err
	}
	return walk("/", v.root)
}
