// Command dbhost makes Linux hosts run databases well: it audits the host
// and every database on it, renders fixes, and snapshots hosts for review.
package main

import (
	"os"

	"github.com/dbhost/dbhost/internal/cli"
)

// version is set at build time: -ldflags "-X main.version=..."
var version = "dev"

func main() {
	os.Exit(cli.Main(os.Args, cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, Stdin: os.Stdin, Version: version}))
}
