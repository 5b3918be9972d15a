package mongo

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/engine"
)

const packaged = `# mongod.conf

# for documentation of all options, see:
#   http://docs.mongodb.org/manual/reference/configuration-options/

storage:
  dbPath: /var/lib/mongodb
  wiredTiger:
    engineConfig:
      cacheSizeGB: 1.5

systemLog:
  destination: file
  logAppend: true
  path: /var/log/mongodb/mongod.log

net:
  port: 27017
  bindIp: 127.0.0.1,10.0.0.5

processManagement:
  timeZoneInfo: /usr/share/zoneinfo

security:
  authorization: enabled

setParameter:
  enableLocalhostAuthBypass: false
replication:
  replSetName: rs0
`

func options(c *Conf) map[string]Option {
	m := map[string]Option{}
	for _, o := range c.Options {
		m[o.Name] = o
	}
	return m
}

func TestParseConf(t *testing.T) {
	c := ParseConf([]byte(packaged), "/etc/mongod.conf")
	if len(c.Errors) != 0 || c.Invalid {
		t.Fatalf("errors: %v", c.Errors)
	}
	m := options(c)
	want := map[string]Option{
		"storage.dbPath": {Name: "storage.dbPath", Value: "/var/lib/mongodb", Source: "file:/etc/mongod.conf:7"},
		"storage.wiredTiger.engineConfig.cacheSizeGB": {Name: "storage.wiredTiger.engineConfig.cacheSizeGB", Value: "1.5", Source: "file:/etc/mongod.conf:10"},
		"net.bindIp":                             {Name: "net.bindIp", Value: "127.0.0.1,10.0.0.5", Source: "file:/etc/mongod.conf:19"},
		"security.authorization":                 {Name: "security.authorization", Value: "enabled", Source: "file:/etc/mongod.conf:25"},
		"setParameter.enableLocalhostAuthBypass": {Name: "setParameter.enableLocalhostAuthBypass", Value: "false", Source: "file:/etc/mongod.conf:28"},
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %+v, want %+v", k, m[k], v)
		}
	}
}

func TestParseConfBad(t *testing.T) {
	cases := []struct {
		text    string
		invalid bool
		errPart string
	}{
		{"net:\n\tport: 1\n", true, "found character that cannot start any token"},
		{"net: [1, 2\n", true, "mongod would refuse to start"},
		{"- a\n- b\n", true, "not a YAML mapping"},
		{"just a string", true, "not a YAML mapping"},
		{"", false, ""},
		{"# only comments\n", false, ""},
		{"nets:\n  port: 1\n", false, `unknown section "nets"`},
		{"net:\n  bindIp:\n    __exec: \"hostname -i\"\n", false, "__exec expansion"},
		{"net:\n  bindIp:\n    - 127.0.0.1\n    - ::1\n", false, ""},
		{"a: &x [*x]\n", false, "unknown section"},
		{strings.Repeat("x", maxConfBytes+1), true, "too large"},
	}
	for _, c := range cases {
		got := ParseConf([]byte(c.text), "/etc/mongod.conf")
		if got.Invalid != c.invalid || !strings.Contains(strings.Join(got.Errors, "\n"), c.errPart) {
			t.Errorf("%.40q: invalid %v errors %q; want invalid %v with %q", c.text, got.Invalid, got.Errors, c.invalid, c.errPart)
		}
	}
	seq := options(ParseConf([]byte("net:\n  bindIp:\n    - 127.0.0.1\n    - ::1\n"), "f"))
	if seq["net.bindIp"].Value != "127.0.0.1,::1" {
		t.Errorf("sequence bindIp = %+v", seq["net.bindIp"])
	}
}

func TestParseCmdline(t *testing.T) {
	c := ParseCmdline([]string{"/usr/bin/mongod", "--config", "/etc/mongod.conf", "--port=27020", "--bind_ip_all", "--auth",
		"--wiredTigerCacheSizeGB", "2", "-vvv", "--setParameter", "diagnosticDataCollectionEnabled=false", "--logpath", "/var/log/m.log", "--quiet"})
	if c.ConfigFile != "/etc/mongod.conf" {
		t.Errorf("config = %q", c.ConfigFile)
	}
	var got []string
	for _, o := range c.Options {
		got = append(got, o.Name+"="+o.Value)
	}
	want := []string{"net.port=27020", "net.bindIpAll=true", "security.authorization=enabled",
		"storage.wiredTiger.engineConfig.cacheSizeGB=2", "setParameter.diagnosticDataCollectionEnabled=false",
		"systemLog.path=/var/log/m.log", "systemLog.destination=file", "systemLog.quiet=true"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("options =\n%q\nwant\n%q", got, want)
	}
	for _, argv := range [][]string{{"mongod", "-f", "/a.conf"}, {"mongod", "-f/a.conf"}, {"mongod", "--config=/a.conf"}} {
		if c := ParseCmdline(argv); c.ConfigFile != "/a.conf" {
			t.Errorf("%q: config %q", argv, c.ConfigFile)
		}
	}
	// An unknown option with a value must not swallow the next option.
	c = ParseCmdline([]string{"mongod", "--someNewOption", "--dbpath", "/d"})
	if len(c.Options) != 1 || c.Options[0].Value != "/d" {
		t.Errorf("%+v", c.Options)
	}
}

func TestDefaultsAndAuth(t *testing.T) {
	in := &engine.Instance{Version: "3.4.24"}
	defaults(in)
	if in.SettingValue("net.bindIpAll") != "true" || in.SettingValue("storage.engine") != "wiredTiger" {
		t.Errorf("3.4 defaults: %+v", in.Settings)
	}
	in = &engine.Instance{Version: "8.0.4"}
	defaults(in)
	if in.SettingValue("net.bindip") != "localhost" || in.Settings["storage.dbpath"].Source != "default" {
		t.Errorf("8.0 defaults: %+v", in.Settings)
	}
	if on, by := AuthEnforced(in); on || by != "security.authorization" {
		t.Errorf("default auth %v %s", on, by)
	}
	in.Set("security.keyFile", "/etc/mongo.key", "file:x:1")
	if on, by := AuthEnforced(in); !on || by != "security.keyFile" {
		t.Errorf("keyFile auth %v %s", on, by)
	}
	in.Set("security.transitionToAuth", "true", "file:x:2")
	if on, _ := AuthEnforced(in); on {
		t.Error("transitionToAuth lets unauthenticated clients in")
	}
}

// bsonDoc builds a BSON document from already-encoded elements.
func bsonDoc(elems ...[]byte) []byte {
	var body []byte
	for _, e := range elems {
		body = append(body, e...)
	}
	out := binary.LittleEndian.AppendUint32(nil, uint32(len(body)+5))
	out = append(out, body...)
	return append(out, 0)
}

func bsonString(k, v string) []byte {
	out := append([]byte{0x02}, k...)
	out = append(out, 0)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(v)+1))
	out = append(out, v...)
	return append(out, 0)
}

func bsonSub(k string, doc []byte) []byte {
	out := append([]byte{0x03}, k...)
	out = append(out, 0)
	return append(out, doc...)
}

func bsonBool(k string, v bool) []byte {
	out := append([]byte{0x08}, k...)
	b := byte(0)
	if v {
		b = 1
	}
	return append(append(out, 0), b)
}

func TestStorageBSON(t *testing.T) {
	doc := bsonDoc(bsonSub("storage", bsonDoc(bsonString("engine", "wiredTiger"),
		bsonSub("options", bsonDoc(bsonBool("directoryPerDB", false), bsonBool("directoryForIndexes", false))))))
	if e, err := storageBSONEngine(doc); err != nil || e != "wiredTiger" {
		t.Errorf("engine %q %v", e, err)
	}
	for _, bad := range [][]byte{nil, {1, 2, 3}, doc[:len(doc)-3], bsonDoc(bsonString("storage", "x"))} {
		if _, err := storageBSONEngine(bad); err == nil {
			t.Errorf("%x: no error", bad)
		}
	}
}
