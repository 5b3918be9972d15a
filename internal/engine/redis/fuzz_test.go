package redis

import (
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/engine"
)

// FuzzParseRedisConf feeds arbitrary text to the redis.conf parser as a file
// that may include itself and a sibling with the same text: parsing must
// end, never panic, and never read more files than its limit.
func FuzzParseRedisConf(f *testing.F) {
	seeds := []string{
		"bind 127.0.0.1 -::1\nport 6379\nsave \"\"\n",
		"include /etc/redis/redis.conf\n",
		"include /etc/redis/*.conf\nrequirepass \"a b\\x41\"\n",
		"user default on >pw ~* &* +@all\naclfile users.acl\n",
		"dir /var/lib/redis\ninclude other.conf\n",
		"save 900 1\nsave 300 10\nsave ''\n",
		"a \"b\"c\n'\n\"\\x\n",
		"include other.conf\ninclude other.conf\n",
		strings.Repeat("include /etc/redis/other.conf\n", 50),
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		fsys := mapFS{"/etc/redis/redis.conf": text, "/etc/redis/other.conf": text}
		c := ParseConf(fsys, "/etc/redis/redis.conf", "/etc/redis")
		if len(c.Files) > maxFiles {
			t.Fatalf("read %d files", len(c.Files))
		}
		in := &engine.Instance{Version: "7.0.0"}
		defaults(in)
		s := newSettings(in)
		for _, d := range c.Directives {
			s.apply(d)
		}
		s.auth()
		argv := append([]string{"redis-server"}, strings.Fields(text)...)
		for _, d := range ParseCmdline(argv).Options {
			s.apply(d)
		}
		parseTitle([]string{text})
		unitWords(text)
	})
}
