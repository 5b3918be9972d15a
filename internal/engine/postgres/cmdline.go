package postgres

import (
	"strings"

	"github.com/dbhost/dbhost/internal/host"
)

// Args is what a postmaster's command line says.
type Args struct {
	// ConfigDir is -D: the configuration directory, and the data directory
	// unless data_directory says otherwise.
	ConfigDir string
	// Settings are -c name=value, --name=value and the short options that
	// stand for a setting (-B, -N, -p, -k, -h, -i, -F, -S, -l), in order.
	Settings []Directive
}

// shortSetting maps postgres's short options with an argument to the
// setting they set.
var shortSetting = map[byte]string{
	'B': "shared_buffers",
	'N': "max_connections",
	'p': "port",
	'k': "unix_socket_directories",
	'h': "listen_addresses",
	'S': "work_mem",
	'd': "", // debug level
	'r': "", // output file (single-user mode)
	'C': "", // print a setting and exit
	'f': "", // forbid plan types
	't': "", // timing statistics
	'W': "post_auth_delay",
}

// shortFlag maps the short options without an argument to their setting.
var shortFlag = map[byte][2]string{
	'F': {"fsync", "off"},
	'i': {"listen_addresses", "*"},
	'l': {"ssl", "on"},
}

// ParseArgs reads the server options of a postgres command line (argv[0]
// excluded), the way postgres's getopt loop does: options may be attached
// ("-p5432", "-cwork_mem=4MB") or separate ("-p 5432").
func ParseArgs(args []string) Args {
	var a Args
	set := func(name, value string) {
		name = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(name)), "-", "_")
		if name == "" {
			return
		}
		a.Settings = append(a.Settings, Directive{Name: name, Value: redactValue(name, value)})
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == host.Redacted || len(arg) < 2 || arg[0] != '-' {
			continue
		}
		if strings.HasPrefix(arg, "--") {
			name, value, ok := strings.Cut(arg[2:], "=")
			if ok {
				set(name, value)
			}
			continue
		}
		// A cluster of short options: flags may be grouped ("-iF"); an
		// option with an argument takes the rest of the word or the next.
		for j := 1; j < len(arg); j++ {
			opt := arg[j]
			if f, ok := shortFlag[opt]; ok {
				set(f[0], f[1])
				continue
			}
			_, isShort := shortSetting[opt]
			if opt != 'c' && opt != 'D' && !isShort {
				continue // a flag dbhost does not care about
			}
			val := arg[j+1:]
			if val == "" && i+1 < len(args) {
				i++
				val = args[i]
			}
			switch opt {
			case 'D':
				a.ConfigDir = val
			case 'c':
				if name, value, ok := strings.Cut(val, "="); ok {
					set(name, value)
				}
			default:
				if name := shortSetting[opt]; name != "" {
					set(name, val)
				}
			}
			break
		}
	}
	return a
}

// Value returns the last value the command line gives a setting.
func (a Args) Value(name string) (string, bool) {
	for i := len(a.Settings) - 1; i >= 0; i-- {
		if a.Settings[i].Name == name {
			return a.Settings[i].Value, true
		}
	}
	return "", false
}
