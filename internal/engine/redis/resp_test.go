package redis

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// fakeServer answers each command read from a client with the next reply.
func fakeServer(t *testing.T, replies ...string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "redis.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		for _, rep := range replies {
			// Read one RESP array command.
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			var n int
			fmt.Sscanf(line, "*%d", &n)
			for i := 0; i < 2*n; i++ {
				if _, err := r.ReadString('\n'); err != nil {
					return
				}
			}
			fmt.Fprint(c, rep)
		}
	}()
	return "unix:" + sock
}

// The fake servers run in this process: it is the instance asked.
var self = &engine.Instance{PID: os.Getpid()}

func selfHost(t *testing.T) *host.Host {
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func bulk(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }

func TestAskNoAuth(t *testing.T) {
	addr := fakeServer(t, "-NOAUTH Authentication required.\r\n")
	l := ask(context.Background(), selfHost(t), self, []string{"unix:/nonexistent/x.sock", addr}, time.Second)
	if l.Via != addr || !l.AuthRequired || l.Info != nil || len(l.Tried) != 1 {
		t.Fatalf("%+v", l)
	}
}

func TestAskInfoAndConfig(t *testing.T) {
	info := "# Server\r\nredis_version:7.0.15\r\nprocess_id:42\r\nconfig_file:/etc/redis/redis.conf\r\n"
	cfg := "*6\r\n" + bulk("requirepass") + bulk("") + bulk("masterauth") + bulk("hunter2") + bulk("Bind") + bulk("127.0.0.1 -::1")
	addr := fakeServer(t, bulk(info), cfg)
	l := ask(context.Background(), selfHost(t), self, []string{addr}, time.Second)
	if l.Via != addr || l.AuthRequired || l.Info["redis_version"] != "7.0.15" || l.Info["config_file"] != "/etc/redis/redis.conf" {
		t.Fatalf("%+v", l)
	}
	if l.Config["masterauth"] != host.Redacted || l.Config["requirepass"] != "" || l.Config["bind"] != "127.0.0.1 -::1" {
		t.Errorf("config %v", l.Config)
	}
}

func TestAskConfigRefused(t *testing.T) {
	addr := fakeServer(t, bulk("redis_version:7.2.4\r\n"), "-ERR unknown command 'CONFIG', with args beginning with: 'GET' '*'\r\n")
	l := ask(context.Background(), selfHost(t), self, []string{addr}, time.Second)
	if l.Via != addr || l.Config != nil || !strings.Contains(l.ConfigErr, "unknown command") {
		t.Fatalf("%+v", l)
	}
}

func TestReadReplyBounds(t *testing.T) {
	for _, in := range []string{"$99999999999\r\n", "*99999999\r\n", "?\r\n", "\r\n", "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", "$5\r\nab"} {
		if _, err := readReply(bufio.NewReader(strings.NewReader(in)), 0); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}
