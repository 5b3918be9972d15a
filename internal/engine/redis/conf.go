package redis

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
)

// Directive is one configuration line of redis.conf or one --option of the
// command line: a lower-cased name and its arguments.
type Directive struct {
	Name   string
	Args   []string
	Source string // "file:/etc/redis/redis.conf:12" or "cmdline"
}

// Value joins the arguments the way CONFIG GET prints a multi-argument
// setting ("127.0.0.1 -::1"); `save ""` is "".
func (d Directive) Value() string { return strings.Join(d.Args, " ") }

// FS is what the parser reads files through (the host model in production,
// a map in tests).
type FS interface {
	ReadFile(path string) ([]byte, error)
	ReadDir(dir string) ([]string, error)
}

// Conf is the result of reading a configuration file and its includes.
type Conf struct {
	Directives []Directive
	// Files lists the files read, in the order the server reads them.
	Files []string
	// Errors lists what could not be read or parsed.
	Errors []string
	// Unreadable is set when a file the server reads could not be read, so
	// the settings may be incomplete.
	Unreadable bool
}

// Limits that keep a hostile or broken configuration from hanging dbhost.
// Redis itself has no include-loop protection (it recurses until it
// crashes), so a loop here is a finding, not something to follow.
const (
	maxIncludeDepth = 16
	maxFiles        = 256
	maxTotalBytes   = 64 << 20
)

// parser holds the state of one ParseConf call.
type parser struct {
	fs    FS
	cwd   string // the server's working directory as it reads (dir chdirs)
	stack []string
	total int
	c     *Conf
}

// ParseConf reads a redis.conf and, recursively, the files it includes.
// Relative paths are resolved against cwd, which Redis changes while it
// reads whenever a `dir` line is applied, as the server does.
func ParseConf(fs FS, file, cwd string) *Conf {
	p := &parser{fs: fs, cwd: cwd, c: &Conf{}}
	p.file(file, "")
	return p.c
}

// ParseConfString parses configuration text whose includes are read from fs
// (used for tests and fuzzing).
func ParseConfString(fs FS, text, name, cwd string) *Conf {
	p := &parser{fs: fs, cwd: cwd, c: &Conf{}}
	p.stack = append(p.stack, name)
	p.c.Files = append(p.c.Files, name)
	p.text(text, name)
	return p.c
}

func (p *parser) errorf(format string, a ...any) {
	p.c.Errors = append(p.c.Errors, fmt.Sprintf(format, a...))
}

func (p *parser) abs(name string) string {
	if path.IsAbs(name) || p.cwd == "" {
		return path.Clean(name)
	}
	return path.Join(p.cwd, name)
}

// file reads one file (from is the include line that names it, if any).
func (p *parser) file(name, from string) {
	name = p.abs(name)
	for i, s := range p.stack {
		if s == name {
			loop := append(append([]string{}, p.stack[i:]...), name)
			p.errorf("%sinclude loop: %s (not followed; Redis would recurse until it crashes)", prefix(from), strings.Join(loop, " -> "))
			return
		}
	}
	if len(p.stack) >= maxIncludeDepth {
		p.errorf("%sincludes nested deeper than %d files: %s not read", prefix(from), maxIncludeDepth, name)
		return
	}
	if len(p.c.Files) >= maxFiles {
		p.errorf("%smore than %d configuration files: %s not read", prefix(from), maxFiles, name)
		return
	}
	b, err := p.fs.ReadFile(name)
	if err != nil {
		p.c.Unreadable = true
		p.errorf("%scannot read %s: %s", prefix(from), name, explain(err))
		return
	}
	p.total += len(b)
	if p.total > maxTotalBytes {
		p.c.Unreadable = true
		p.errorf("%sconfiguration larger than %d MiB in total: %s not parsed", prefix(from), maxTotalBytes>>20, name)
		return
	}
	p.c.Files = append(p.c.Files, name)
	p.stack = append(p.stack, name)
	p.text(string(b), name)
	p.stack = p.stack[:len(p.stack)-1]
}

func prefix(from string) string {
	if from == "" {
		return ""
	}
	return from + ": "
}

// text parses configuration text the way loadServerConfigFromString does:
// one directive per line, blank lines and lines starting with # skipped,
// arguments split with Redis's quoting rules.
func (p *parser) text(s, name string) {
	for i, ln := range strings.Split(s, "\n") {
		ln = strings.Trim(ln, " \t\r\n")
		if ln == "" || ln[0] == '#' {
			continue
		}
		src := fmt.Sprintf("file:%s:%d", name, i+1)
		args, err := SplitArgs(ln)
		if err != nil {
			// Redis refuses to start on such a line; a running server
			// cannot have it, so the file changed after the start.
			p.errorf("%s: %v (Redis would refuse to start with this file)", src, err)
			continue
		}
		if len(args) == 0 {
			continue
		}
		d := Directive{Name: strings.ToLower(args[0]), Args: args[1:], Source: src}
		switch {
		case d.Name == "include" && len(d.Args) == 1:
			p.include(d.Args[0], src)
			continue
		case d.Name == "dir" && len(d.Args) == 1 && d.Args[0] != "":
			// The server chdirs at once: later relative includes and
			// files resolve against the new directory.
			p.cwd = p.abs(d.Args[0])
		}
		p.c.Directives = append(p.c.Directives, d)
	}
}

// include reads one include line's files; a pattern with wildcards reads
// every match in name order and silently matches nothing, like glob(3).
func (p *parser) include(name, src string) {
	if !strings.ContainsAny(name, "*?[") {
		p.file(name, src)
		return
	}
	full := p.abs(name)
	dir, pat := path.Split(full)
	if strings.ContainsAny(dir, "*?[") {
		p.errorf("%s: include %s: wildcards in directory names are not followed by dbhost", src, name)
		return
	}
	names, err := p.fs.ReadDir(dir)
	if err != nil {
		if !isNotExist(err) {
			p.c.Unreadable = true
			p.errorf("%s: include %s: %s", src, name, explain(err))
		}
		return
	}
	sort.Strings(names)
	for _, n := range names {
		if strings.HasPrefix(n, ".") && !strings.HasPrefix(pat, ".") {
			continue
		}
		if ok, err := path.Match(pat, n); err != nil {
			p.errorf("%s: include %s: %v", src, name, err)
			return
		} else if ok {
			p.file(path.Join(dir, n), src)
		}
	}
}

// ErrUnbalancedQuotes is the error Redis reports for a line it cannot split.
var ErrUnbalancedQuotes = errors.New("unbalanced quotes in configuration line")

// SplitArgs splits a line into arguments exactly as Redis's sdssplitargs
// does: "double quotes" with \n \r \t \b \a \xHH escapes, 'single quotes'
// with \' only, a closing quote must be followed by a space or the end.
func SplitArgs(line string) ([]string, error) {
	var out []string
	i, n := 0, len(line)
	for {
		for i < n && isSpace(line[i]) {
			i++
		}
		if i >= n {
			return out, nil
		}
		var cur []byte
		inq, insq := false, false
		for done := false; !done; {
			var c byte
			if i < n {
				c = line[i]
			}
			switch {
			case inq:
				switch {
				case c == '\\' && i+3 < n && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
					cur = append(cur, unhex(line[i+2])<<4|unhex(line[i+3]))
					i += 3
				case c == '\\' && i+1 < n:
					i++
					switch line[i] {
					case 'n':
						cur = append(cur, '\n')
					case 'r':
						cur = append(cur, '\r')
					case 't':
						cur = append(cur, '\t')
					case 'b':
						cur = append(cur, '\b')
					case 'a':
						cur = append(cur, '\a')
					default:
						cur = append(cur, line[i])
					}
				case c == '"':
					if i+1 < n && !isSpace(line[i+1]) {
						return nil, ErrUnbalancedQuotes
					}
					done = true
				case i >= n:
					return nil, ErrUnbalancedQuotes
				default:
					cur = append(cur, c)
				}
			case insq:
				switch {
				case c == '\\' && i+1 < n && line[i+1] == '\'':
					i++
					cur = append(cur, '\'')
				case c == '\'':
					if i+1 < n && !isSpace(line[i+1]) {
						return nil, ErrUnbalancedQuotes
					}
					done = true
				case i >= n:
					return nil, ErrUnbalancedQuotes
				default:
					cur = append(cur, c)
				}
			default:
				switch {
				case i >= n || c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == 0:
					done = true
				case c == '"':
					inq = true
				case c == '\'':
					insq = true
				default:
					cur = append(cur, c)
				}
			}
			if i < n {
				i++
			}
		}
		out = append(out, string(cur))
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// Cmdline is what a server's original argument list says.
type Cmdline struct {
	// ConfigFile is the first argument when it is not an option.
	ConfigFile string
	// Stdin: "-" asks the server to read its configuration from standard
	// input, which dbhost cannot see.
	Stdin bool
	// Options are the --name value... options, in order; they are applied
	// after the file, so they win.
	Options []Directive
	// Sentinel: the server runs as Redis Sentinel.
	Sentinel bool
}

// ParseCmdline interprets redis-server's arguments (argv[0] included) with
// the rules of its main(): the first argument is the config file unless it
// starts with "-"; "--name" starts an option and the following arguments
// that do not start with "--" are its values, so `--bind 127.0.0.1 -::1`
// has two values; `--save` followed by another option or nothing means
// `save ""`.
func ParseCmdline(argv []string) Cmdline {
	var c Cmdline
	if len(argv) < 2 {
		return c
	}
	j := 1
	if a := argv[1]; a != "" && a[0] != '-' {
		c.ConfigFile = a
		j = 2
	}
	handled := true // the previous option already has a value
	var cur *Directive
	flush := func() {
		if cur != nil {
			c.Options = append(c.Options, *cur)
			cur = nil
		}
	}
	for ; j < len(argv); j++ {
		a := argv[j]
		switch {
		case a == "-" && (j == 1 || j == len(argv)-1):
			c.Stdin = true
		case handled && strings.HasPrefix(a, "--"):
			flush()
			parts, err := SplitArgs(a[2:])
			if err != nil || len(parts) == 0 {
				parts = []string{a[2:]}
			}
			cur = &Directive{Name: strings.ToLower(parts[0]), Args: append([]string(nil), parts[1:]...), Source: "cmdline"}
			handled = len(parts) > 1
			if cur.Name == "sentinel" {
				c.Sentinel = true
				handled = true
			}
			if cur.Name == "save" && !handled && (j == len(argv)-1 || strings.HasPrefix(argv[j+1], "--")) {
				cur.Args = []string{""}
				handled = true
			}
		default:
			if cur == nil {
				// A stray value before any option: Redis would append it
				// to the (empty) option text and fail; keep going.
				continue
			}
			cur.Args = append(cur.Args, a)
			handled = true
		}
	}
	flush()
	return c
}
