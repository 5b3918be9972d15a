package cli

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/testdb"
)

// TestNoSecretsInOutput plants URI passwords where a real server keeps
// them — a command-line setting (also read back live) and its
// configuration file — and asserts that neither a snapshot nor the JSON
// audit carries them.
func TestNoSecretsInOutput(t *testing.T) {
	const onCmdline, inFile = "PlantedCmd7731", "PlantedConf7732"
	s := testdb.Postgres(t, testdb.Options{Settings: map[string]string{
		"primary_conninfo": "postgresql://rep:" + onCmdline + "@db1:5432/postgres?sslmode=require",
	}})
	conf := filepath.Join(s.DataDir, "postgresql.conf")
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("cluster_name = 'mongodb://app:" + inFile + "@m1:27017/admin'\n")
	f.Close()

	snap := filepath.Join(t.TempDir(), "snap.tar.gz")
	if code, _, stderr := runCLI(t, "collect", "-o", snap); code != ExitOK {
		t.Fatalf("collect: %d %s", code, stderr)
	}
	raw := archiveText(t, snap)
	if !strings.Contains(raw, "@db1:5432/postgres") || !strings.Contains(raw, conf) {
		t.Fatal("the snapshot lacks the private server's settings or its config file: the test proves nothing")
	}
	_, live, _ := runCLI(t, "audit", "--format", "json", "--only", "pg")
	_, replay, _ := runCLI(t, "audit", "--from", snap, "--format", "json", "--only", "pg")
	for what, out := range map[string]string{"snapshot": raw, "live audit": live, "audit of the snapshot": replay} {
		for _, secret := range []string{onCmdline, inFile} {
			if strings.Contains(out, secret) {
				t.Errorf("%s holds the planted password %s", what, secret)
			}
		}
	}
}

// archiveText is everything a snapshot holds, as text: files, manifest,
// errors, and the probes' outputs (base64 in probes.json) decoded.
func archiveText(t *testing.T, file string) string {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	gz, err := gzip.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
		if hdr.Name == "probes.json" {
			var probes map[string]struct{ Out []byte }
			if err := json.Unmarshal(data, &probes); err != nil {
				t.Fatal(err)
			}
			for _, p := range probes {
				b.Write(p.Out)
				b.WriteByte('\n')
			}
		}
	}
	return b.String()
}
