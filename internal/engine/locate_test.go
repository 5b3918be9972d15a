package engine_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/engine"
	_ "github.com/dbhost/dbhost/internal/engine/all"
	"github.com/dbhost/dbhost/internal/host"
)

// TestLocateRefusesWhatIsNotDiscovered: an endpoint that no discovered
// server of this host holds — another machine's address, a port nothing
// (or a user's listener) holds — is not located, and a connection is not
// even attempted from an endpoint that was not.
func TestLocateRefusesWhatIsNotDiscovered(t *testing.T) {
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		ep   engine.Endpoint
		want string
	}{
		{engine.Endpoint{Engine: engine.Postgres, Host: "192.0.2.7", Port: 5432}, "not an address of this host"},
		{engine.Endpoint{Engine: engine.MySQL, Host: "127.0.0.1", Port: port}, "no mysql server discovered on this host listens"},
	} {
		_, err := engine.Locate(ctx, h, tc.ep)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Locate(%s) = %v, want %q", tc.ep, err, tc.want)
		}
	}
	ep := engine.Endpoint{Engine: engine.Postgres, Host: "127.0.0.1", Port: port}
	if _, err := ep.Dial(ctx, "tcp", l.Addr().String(), 0); !errors.Is(err, engine.ErrNotLocated) {
		t.Errorf("Dial of an endpoint not located = %v, want ErrNotLocated", err)
	}
}
