package redis

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
)

// A socket served by a process other than the instance is not asked: not
// a byte is written to it, and Tried says who serves it.
func TestAskOnlyTheInstancesSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "redis.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, _ := c.Read(make([]byte, 64))
		got <- n
	}()
	other := &engine.Instance{PID: 1} // this test process listens, not pid 1
	l := ask(context.Background(), selfHost(t), other, []string{"unix:" + sock}, time.Second)
	if l.Via != "" || len(l.Tried) != 1 || !strings.Contains(l.Tried[0], "not the discovered pid 1") {
		t.Fatalf("%+v", l)
	}
	if n := <-got; n != 0 {
		t.Errorf("%d bytes were sent to a server that is not the instance", n)
	}
}
