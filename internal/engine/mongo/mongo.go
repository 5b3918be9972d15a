// Package mongo finds running MongoDB servers (mongod) and reads mongod.conf
// and their command line.
package mongo

import (
	_ "gopkg.in/yaml.v3" // mongod.conf (kept in go.mod until used)
)
