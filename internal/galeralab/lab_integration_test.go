package galeralab

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/testdb"
)

// labRoot is a root-only directory the mysql user can pass through.
func labRoot(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "dbhost-lab-test-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o711)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func needLab(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration: starts a Galera lab")
	}
	testdb.Need(t, "root (network namespaces)", os.Geteuid() == 0)
	_, err := trustedBins()
	testdb.Need(t, "the lab's packages: "+errString(err), err == nil)
	testdb.HoldHost(t)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

type logW struct{ t *testing.T }

func (w logW) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func TestLabTry(t *testing.T) {
	needLab(t)
	ctx := context.Background()
	l, err := Start(ctx, Config{Name: "t1", Root: labRoot(t), Nodes: 3, Arbitrator: true, Log: logW{t}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := l.Status(ctx, "node2")
	t.Logf("%+v %v rss=%d", st, err, l.RSS())
	time.Sleep(time.Second)
	if err := l.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	t.Log(l.Times())
}
