package experiment

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/testdb"
)

// TestExplicitTargetImpostorRefused: a user's program that listens where
// --pg or --mysql points (a port, a socket) is not a server discovered on
// this host that may receive credentials: the experiment refuses it before
// it sends a byte, so the password in the target never reaches it.
func TestExplicitTargetImpostorRefused(t *testing.T) {
	if testing.Short() && !testdb.Required() {
		t.Skip("integration test (-short)")
	}
	testdb.Need(t, "root (impostors run as nobody)", os.Geteuid() == 0)
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "dbhost-impostor-sock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	if err := os.Chown(sockDir, testdb.Nobody, testdb.Nobody); err != nil {
		t.Fatal(err)
	}
	os.Chmod(sockDir, 0o755)

	pgPort, pgSockPort, myPort := testdb.FreePort(t), testdb.FreePort(t), testdb.FreePort(t)
	const secret = "imp0stor-bait"
	for _, tc := range []struct {
		name   string
		imp    testdb.ImpostorOptions
		target Target
	}{
		{"pg tcp", testdb.ImpostorOptions{Name: "postgres", Args: []string{"-D", "DIR/data", "-c", fmt.Sprintf("port=%d", pgPort)}, Dirs: []string{"data"},
			Env: []string{"FAKE_MODE=pg", fmt.Sprintf("FAKE_TCP=127.0.0.1:%d", pgPort)}},
			Target{PG: fmt.Sprintf("host=127.0.0.1 port=%d user=postgres password=%s sslmode=disable", pgPort, secret)}},
		{"pg socket", testdb.ImpostorOptions{Name: "postgres", Args: []string{"-D", "DIR/data", "-c", fmt.Sprintf("port=%d", pgSockPort)}, Dirs: []string{"data"},
			Env: []string{"FAKE_MODE=pg", "FAKE_SOCKET=" + filepath.Join(sockDir, fmt.Sprintf(".s.PGSQL.%d", pgSockPort))}},
			Target{PG: fmt.Sprintf("host=%s port=%d user=postgres password=%s", sockDir, pgSockPort, secret)}},
		{"mysql tcp", testdb.ImpostorOptions{Name: "mariadbd", Args: []string{"--datadir=DIR/data", fmt.Sprintf("--port=%d", myPort)}, Dirs: []string{"data"},
			Env: []string{"FAKE_MODE=mysql", fmt.Sprintf("FAKE_TCP=127.0.0.1:%d", myPort)}},
			Target{MySQL: fmt.Sprintf("root:%s@tcp(127.0.0.1:%d)/", secret, myPort)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := testdb.StartImpostor(t, tc.imp)
			p := &Plan{Target: tc.target}
			_, err := userServer(context.Background(), h, p, &Facts{})
			if err == nil {
				t.Fatal("the impostor was accepted as the target")
			}
			t.Logf("refused: %v", err)
			if !strings.Contains(err.Error(), "not connected") && !strings.Contains(err.Error(), "does not log in to") {
				t.Errorf("the refusal does not say why: %v", err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error shows the password: %v", err)
			}
			if got := im.Log("harvest.log"); got != "" {
				t.Errorf("the impostor received a login: %s", got)
			}
		})
	}
}
