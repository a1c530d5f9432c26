package zktest

import (
	"net"
	"testing"
	"time"
)

func TestStartZooKeeperAnswersRuok(t *testing.T) {
	if !Available() {
		t.Skip(ErrNoZooKeeper)
	}
	z, err := StartZooKeeper(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := z.Stop(); err != nil {
			t.Error(err)
		}
	})
	c, err := net.DialTimeout("tcp", z.Addrs[0], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ruok")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 16)
	n, _ := c.Read(buf)
	if got := string(buf[:n]); got != "imok" {
		t.Fatalf("ruok = %q; want imok", got)
	}
}
