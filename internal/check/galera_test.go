package check_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/galera"
	"github.com/dbhost/dbhost/internal/plan"
)

// galeraSSTSecret is the password galera-node's option file held when it
// was recorded (tools/record/scenarios_galera.go).
const galeraSSTSecret = "Fixture-SST-Secret-7Q"

// The SST credentials never reach a snapshot, the facts, or a finding:
// galera-node was collected from a server whose option file held them.
func TestGaleraSSTAuthRedacted(t *testing.T) {
	for _, name := range []string{"galera-node", "galera-node-nonroot"} {
		raw, err := os.ReadFile(fixture.Path(name))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		tarBytes, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(tarBytes, []byte(galeraSSTSecret)) {
			t.Errorf("%s: the snapshot holds the SST password", name)
		}
		f := fixture.Facts(t, name)
		js, _ := json.Marshal(f)
		fds, _ := json.Marshal(check.Run(f, check.Selector{}))
		if bytes.Contains(js, []byte(galeraSSTSecret)) || bytes.Contains(fds, []byte(galeraSSTSecret)) {
			t.Errorf("%s: facts or findings hold the SST password", name)
		}
		if name != "galera-node" {
			continue
		}
		in := instance(f, galeraNode)
		// Known to be set (the check judges its file), never its value.
		for what, s := range map[string]string{"setting": in.SettingValue("wsrep_sst_auth"), "configured": in.MySQL.Configured["wsrep_sst_auth"].Value} {
			if s != "<redacted>" {
				t.Errorf("%s wsrep_sst_auth = %q, want it redacted", what, s)
			}
		}
		if in.SSTAuth == nil || !strings.HasSuffix(in.SSTAuth.File, "/my.cnf") || in.SSTAuth.Perm != 0o644 || !in.SSTAuth.WorldReadable() {
			t.Errorf("SST credentials' file %+v, want the 0644 my.cnf", in.SSTAuth)
		}
	}
}

// A fix is never judged alone: the gcache and evs fixes of one node both
// change wsrep_provider_options, and the plan holds one line with both,
// keeping the options the file already sets; on the planned host both
// checks pass.
func TestGaleraProviderFixesShareOneLine(t *testing.T) {
	f := fixture.Facts(t, "galera-node-degraded")
	ids := []string{"galera.gcache", "galera.evs_timeouts"}
	p := plan.Make(f, check.Selector{Only: ids})
	for _, c := range p.Conflicts {
		t.Errorf("conflict: %s", c)
	}
	lines := map[string]bool{}
	for _, it := range p.Items {
		for _, c := range it.Fix.Config {
			if c.Key == "wsrep_provider_options" {
				lines[c.Value] = true
			}
		}
	}
	if len(p.Items) != 2 || len(lines) != 1 {
		t.Fatalf("items %d, provider option lines %v: want both fixes with one line", len(p.Items), lines)
	}
	for line := range lines {
		opts := galera.ParseProviderOptions(line)
		if strings.Count(line, "gcache.size") != 1 || opts["gcache.size"] != "2560M" || opts["evs.suspect_timeout"] != "PT10S" ||
			opts["evs.inactive_check_period"] != "PT1.8S" || !strings.HasPrefix(opts["gmcast.listen_addr"], "tcp://127.0.0.1:") || opts["ist.recv_addr"] == "" {
			t.Errorf("line %q: want the file's gmcast.listen_addr and ist.recv_addr, gcache.size=2560M and the evs timeouts, each once", line)
		}
	}
	for _, fd := range p.Planned {
		if (fd.ID == ids[0] || fd.ID == ids[1]) && fd.Subject == galeraNode && fd.Status != check.Pass {
			t.Errorf("%s on the planned host: %s: %s", fd.ID, fd.Status, fd.Reason)
		}
	}
	if p.Refused() {
		t.Errorf("plan refused: %v", p.Refusals)
	}
}

// The primary-key fix names each table as two quoted identifiers, so a
// table's name cannot end the statement a person copies.
func TestGaleraPrimaryKeyStatements(t *testing.T) {
	f := cloneFacts(t, "galera-node")
	in := instance(f, galeraNode)
	in.MySQL.Tables.WithoutPK = append(in.MySQL.Tables.WithoutPK, "shop.we`ird; DROP TABLE x")
	in.MySQL.Tables.WithoutPKCount++
	c, _ := check.Lookup("galera.primary_keys")
	var manual string
	for _, r := range c.Run(f) {
		if r.Subject == galeraNode && r.Fix != nil {
			manual = r.Fix.Manual
		}
	}
	for _, want := range []string{"ALTER TABLE `app`.`audit_log` ADD COLUMN", "ALTER TABLE `app`.`sessions` ENGINE=InnoDB;", "ALTER TABLE `shop`.`we``ird; DROP TABLE x` ADD"} {
		if !strings.Contains(manual, want) {
			t.Errorf("fix lacks %q:\n%s", want, manual)
		}
	}
}
