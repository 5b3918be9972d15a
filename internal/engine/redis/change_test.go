package redis

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
)

func TestSameValue(t *testing.T) {
	for _, c := range []struct {
		got, want string
		same      bool
	}{
		{"2052063232", "1957mb", true},
		{"2052063232", "1957MB", true},
		{"1957000000", "1957m", true},
		{"1957000000", "1957mb", false},
		{"1024", "1kb", true},
		{"1000", "1k", true},
		{"1000", "1kb", false},
		{"1073741824", "1gb", true},
		{"1000000000", "1G", true},
		{"0", "0", true},
		{"allkeys-lru", "ALLKEYS-LRU", true},
		{"allkeys-lru", "noeviction", false},
		{"yes", "no", false},
		{"", "0", false},
	} {
		if got := SameValue(c.got, c.want); got != c.same {
			t.Errorf("SameValue(%q, %q) = %v", c.got, c.want, got)
		}
	}
}

func TestRefusedSettings(t *testing.T) {
	for _, k := range []string{"maxmemory", "maxmemory-policy", "hz", "tcp-keepalive"} {
		if why := refusedSetting(k); why != "" {
			t.Errorf("%s refused: %s", k, why)
		}
	}
	for _, k := range []string{"", "Maxmemory", "max memory", "maxmemory*", "1hz", "max_memory", "requirepass", "masterauth",
		"dir", "dbfilename", "logfile", "aclfile", "a\r\nFLUSHALL"} {
		if refusedSetting(k) == "" {
			t.Errorf("%q accepted", k)
		}
	}
	for _, v := range []string{"1957mb", "allkeys-lru", "0", "", "a,b:c/d"} {
		if err := checkValue(v); err != nil {
			t.Errorf("%q refused: %v", v, err)
		}
	}
	for _, v := range []string{"1 2", "a\nb", "x\x00", "\t", "é"} {
		if checkValue(v) == nil {
			t.Errorf("%q accepted", v)
		}
	}
}

func infoReply(pid int) string {
	return bulk(fmt.Sprintf("# Server\r\nredis_version:7.0.15\r\nprocess_id:%d\r\n", pid))
}

func trusted(pid int, via string) *engine.Instance {
	return &engine.Instance{Engine: engine.Redis, PID: pid, LiveVia: via, Trust: engine.Trust{Trusted: true, Basis: engine.TrustRule}}
}

// The settings connection is the live read's: verified peer, INFO server
// naming the instance, then CONFIG GET/SET on the same connection; the
// server's refusal is passed on with its message.
func TestSettingsConversation(t *testing.T) {
	addr := fakeServer(t, infoReply(os.Getpid()),
		"*2\r\n"+bulk("maxmemory")+bulk("0"),
		"+OK\r\n",
		"*2\r\n"+bulk("maxmemory")+bulk("2052063232"),
		"-ERR CONFIG SET failed (possibly related to argument 'daemonize') - can't set immutable config\r\n")
	ctx := context.Background()
	s, err := detector{p: Redis}.OpenSettings(ctx, selfHost(t), trusted(os.Getpid(), addr), engine.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Get(ctx, "maxmemory")
	if err != nil || st.Value != "0" || st.Restart || st.Saved != nil {
		t.Fatalf("get: %+v %v", st, err)
	}
	if s.Unchanged(st, "1957mb", false) || s.SavesItself() {
		t.Fatal("unchanged or saves itself")
	}
	if err := s.Change(ctx, "maxmemory", "1957mb", false); err != nil {
		t.Fatal(err)
	}
	if in, pending, err := s.Applied(ctx, "maxmemory", "1957mb", false); !in || pending || err != nil {
		t.Fatalf("applied %v %v %v", in, pending, err)
	}
	err = s.Change(ctx, "daemonize", "yes", false)
	if err == nil || !strings.Contains(err.Error(), "can't set immutable config") {
		t.Fatalf("immutable: %v", err)
	}
	if err := s.Change(ctx, "maxmemory", "1 2", false); err == nil {
		t.Fatal("value with a space sent")
	}
}

func TestSettingsRefusals(t *testing.T) {
	ctx := context.Background()
	h := selfHost(t)
	d := detector{p: Redis}
	in := trusted(os.Getpid(), "")
	in.Trust = engine.Trust{Basis: engine.TrustNone, Why: "runs as nobody"}
	if _, err := d.OpenSettings(ctx, h, in, engine.Options{}); err == nil || !strings.Contains(err.Error(), "not trusted (runs as nobody)") {
		t.Errorf("untrusted: %v", err)
	}
	if _, err := d.OpenSettings(ctx, h, &engine.Instance{PID: os.Getpid()}, engine.Options{}); err == nil || !strings.Contains(err.Error(), "not trusted") {
		t.Errorf("unjudged: %v", err)
	}
	// A server that requires a password is sent none, and refused.
	addr := fakeServer(t, "-NOAUTH Authentication required.\r\n")
	_, err := d.OpenSettings(ctx, h, trusted(os.Getpid(), addr), engine.Options{Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "dbhost sends no password") {
		t.Errorf("noauth: %v", err)
	}
	// An answer from another process (a look-alike behind a forwarded
	// socket) is not the instance.
	addr = fakeServer(t, infoReply(1))
	_, err = d.OpenSettings(ctx, h, trusted(os.Getpid(), addr), engine.Options{Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "not "+fmt.Sprint(os.Getpid())) {
		t.Errorf("other process: %v", err)
	}
}
