// Package all registers every engine detector.
package all

import (
	_ "github.com/dbhost/dbhost/internal/engine/mongo"    // MongoDB
	_ "github.com/dbhost/dbhost/internal/engine/mysql"    // MySQL, MariaDB, Percona, Galera
	_ "github.com/dbhost/dbhost/internal/engine/postgres" // PostgreSQL
	_ "github.com/dbhost/dbhost/internal/engine/redis"    // Redis
	_ "github.com/dbhost/dbhost/internal/engine/valkey"   // Valkey
)
