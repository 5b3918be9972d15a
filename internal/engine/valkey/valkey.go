// Package valkey registers Valkey, the Linux Foundation's fork of Redis 7.2,
// as a profile of the Redis engine: it speaks the same protocol and reads
// the same configuration, so the Redis package finds, reads and judges it;
// what differs is its command name, service account, units and files.
package valkey

import (
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/redis"
)

// Product is Valkey as Debian and the upstream packages install it.
var Product = redis.Product{
	Name: "valkey", Flavor: "Valkey", Comm: "valkey-server", Accounts: []string{"valkey"},
	Units: []string{"valkey-server.service", "valkey.service"},
	Confs: []string{"/etc/valkey/valkey.conf", "/etc/valkey.conf"},
}

func init() { engine.Register(redis.NewProfile(Product)) }
