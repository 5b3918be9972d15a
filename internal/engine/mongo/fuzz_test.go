package mongo

import (
	"testing"

	"github.com/dbhost/dbhost/internal/engine"
)

// FuzzParseMongoConf feeds arbitrary text to the mongod.conf parser (and the
// same bytes to the storage.bson reader): no panic, no hang.
func FuzzParseMongoConf(f *testing.F) {
	for _, s := range []string{
		packaged,
		"net:\n  port: 27017\n  bindIp: 127.0.0.1\n",
		"net:\n\tport: 1\n",
		"a: &a [*a, *a]\nb: &b [*a, *a]\nc: [*b, *b]\n",
		"storage: {dbPath: /d, engine: inMemory}\n",
		"security:\n  authorization: enabled\n  keyFile: /k\n",
		"net:\n  bindIp:\n    __exec: hostname\n",
		"- 1\n- 2\n",
		"{{{{",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		c := ParseConf([]byte(text), "/etc/mongod.conf")
		in := &engine.Instance{Version: "7.0.4"}
		defaults(in)
		for _, o := range c.Options {
			in.Set(o.Name, o.Value, o.Source)
		}
		AuthEnforced(in)
		storageBSONEngine([]byte(text))
	})
}
