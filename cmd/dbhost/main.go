// Command dbhost makes Linux hosts run databases well: it audits the host
// and every database on it, renders fixes, and snapshots hosts for review.
package main

import (
	"os"

	"github.com/dbhost/dbhost/internal/cli"
	"github.com/dbhost/dbhost/internal/host"
)

// version is set at build time: -ldflags "-X main.version=..."
var version = "dev"

func main() {
	host.Version = version
	os.Exit(cli.Main(os.Args, cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, Stdin: os.Stdin}))
}
