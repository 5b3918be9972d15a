package postgres

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// Limits that keep a hostile or broken configuration from hanging discovery.
const (
	// maxDepth is the server's CONF_FILE_MAX_DEPTH: includes nested deeper
	// are refused.
	maxDepth = 10
	// maxFiles and maxBytes bound what one instance's configuration may
	// make dbhost read (include_dir of a huge directory, many big files).
	maxFiles = 1000
	maxBytes = 256 << 20
	// maxSettings bounds the distinct names kept: the server knows a few
	// hundred, a file with millions of names is garbage.
	maxSettings = 20000
)

// AutoConf is the file ALTER SYSTEM writes, read last from the data
// directory.
const AutoConf = "postgresql.auto.conf"

// Config is what an instance's configuration files say: the files read in
// the server's order, the effective assignments (the last one of each name
// wins), and the problems met on the way.
type Config struct {
	includer
	settings map[string]assignment
	capped   bool // maxSettings reached (reported once)
}

// includer reads a configuration file with its include directives the way
// the server does (depth limit, loop detection, include_dir order, size
// bounds). postgresql.conf and pg_hba.conf/pg_ident.conf share it.
type includer struct {
	// Files are the files read, in order.
	Files []string
	// IncludeDirs are the include_dir directories, resolved, in order.
	IncludeDirs []string
	// Errors are include loops, unreadable or missing includes, syntax
	// errors, each prefixed with "file:line".
	Errors []string

	h     *host.Host
	stack []string // files being read, for loop detection
	bytes int
	// trust, when set, vets a file before it is read (nil: read it).
	trust func(file string) error
}

// assignment is where a setting was last assigned. The source string is
// built only at the end: a big file assigns the same names many times.
type assignment struct {
	value string
	file  int // index into Files
	line  int
}

// NewConfig starts reading an instance's configuration through h.
func NewConfig(h *host.Host) *Config {
	return &Config{includer: includer{h: h}, settings: map[string]assignment{}}
}

// ReadMain reads the main configuration file with its includes.
func (c *Config) ReadMain(file string) {
	c.readFile(file, "", 0, false, "")
}

// ReadAuto reads postgresql.auto.conf from the data directory, after the
// main file, as the server does. Its absence is normal.
func (c *Config) ReadAuto(dataDir string) {
	c.readFile(path.Join(dataDir, AutoConf), "", 0, true, "")
}

// Value returns a setting's value (unredacted: only for locating files) and
// whether a file set it.
func (c *Config) Value(name string) (string, bool) {
	a, ok := c.settings[engine.NormalizeName(name)]
	return a.value, ok
}

// Settings returns the assignments with sources "file:PATH:LINE".
func (c *Config) Settings() map[string]engine.Setting {
	out := make(map[string]engine.Setting, len(c.settings))
	for name, a := range c.settings {
		out[name] = engine.Setting{Value: redactValue(name, a.value), Source: "file:" + c.Files[a.file] + ":" + strconv.Itoa(a.line)}
	}
	return out
}

func (c *includer) errorf(from string, line int, format string, args ...any) {
	prefix := from
	if line > 0 {
		prefix += ":" + strconv.Itoa(line)
	}
	if prefix != "" {
		prefix += ": "
	}
	c.Errors = append(c.Errors, prefix+fmt.Sprintf(format, args...))
}

// readFile reads one file at the given include depth. from/fromLine name the
// directive that included it (empty for the main file and auto.conf).
// ifExists: a missing file is skipped silently (include_if_exists, and
// postgresql.auto.conf).
func (c *Config) readFile(file, from string, fromLine int, ifExists bool, directive string) {
	b, ok := c.enter(file, from, fromLine, ifExists, directive)
	if !ok {
		return
	}
	defer c.leave()
	idx := len(c.Files) - 1
	dir := path.Dir(file)
	errs, truncated := ParseConf(b, func(d Directive) {
		switch d.Name {
		case "include":
			c.readFile(resolve(dir, d.Value), file, d.Line, false, d.Name)
		case "include_if_exists":
			c.readFile(resolve(dir, d.Value), file, d.Line, true, d.Name)
		case "include_dir":
			c.readDir(resolve(dir, d.Value), file, d.Line, func(p string) { c.readFile(p, file, d.Line, false, "include_dir file") })
		default:
			c.assign(d, idx)
		}
	})
	for _, e := range errs {
		c.errorf(file, e.Line, "%s", strings.TrimPrefix(e.String(), fmt.Sprintf("line %d: ", e.Line)))
	}
	if truncated {
		c.errorf(file, 0, "more than %d syntax errors; the rest of the file is ignored, as the server does", MaxSyntaxErrors)
	}
}

// enter checks the depth, loops and bounds, reads a file and pushes it on
// the include stack; ok is false when it was not read (the reason is in
// Errors, or it was an absent ifExists file). Each successful enter needs
// a leave once the file is parsed.
func (c *includer) enter(file, from string, fromLine int, ifExists bool, directive string) ([]byte, bool) {
	if depth := len(c.stack); depth > maxDepth {
		c.errorf(from, fromLine, "%s %q: nested more than %d levels deep; the server refuses it", directive, file, maxDepth)
		return nil, false
	}
	for _, f := range c.stack {
		if f == file {
			c.errorf(from, fromLine, "include loop: %s includes %s, which is already being read (the server fails with \"maximum nesting depth exceeded\")", from, file)
			return nil, false
		}
	}
	if len(c.Files) >= maxFiles || c.bytes >= maxBytes {
		c.errorf(from, fromLine, "%s: not read, the configuration already spans %d files / %d MiB", file, len(c.Files), c.bytes>>20)
		return nil, false
	}
	what := "cannot read configuration file " + file
	if directive != "" {
		what = directive + " " + strconv.Quote(file)
	}
	var b []byte
	var err error
	if c.trust != nil {
		err = c.trust(file)
	}
	if err == nil {
		b, err = c.h.ReadConfig(file)
	}
	if err != nil {
		if ifExists && host.IsNotExist(err) {
			return nil, false
		}
		c.errorf(from, fromLine, "%s: %s", what, reason(err, file))
		return nil, false
	}
	c.bytes += len(b)
	c.Files = append(c.Files, file)
	c.stack = append(c.stack, file)
	return b, true
}

func (c *includer) leave() { c.stack = c.stack[:len(c.stack)-1] }

func (c *Config) assign(d Directive, file int) {
	if _, ok := c.settings[d.Name]; !ok && len(c.settings) >= maxSettings {
		if !c.capped {
			c.capped = true
			c.errorf(c.Files[file], d.Line, "more than %d distinct settings; further names are ignored", maxSettings)
		}
		return
	}
	c.settings[d.Name] = assignment{value: d.Value, file: file, line: d.Line}
}

// readDir reads the files of an include_dir with read: names ending in
// ".conf" that do not start with a dot, in byte order (the server sorts
// with strcmp), skipping subdirectories.
func (c *includer) readDir(dir, from string, fromLine int, read func(p string)) {
	if len(c.stack) > maxDepth {
		c.errorf(from, fromLine, "include_dir %q: nested more than %d levels deep; the server refuses it", dir, maxDepth)
		return
	}
	names, err := c.h.ReadDir(dir)
	if err != nil {
		c.errorf(from, fromLine, "include_dir %q: %s", dir, reason(err, dir))
		return
	}
	c.IncludeDirs = append(c.IncludeDirs, dir)
	sort.Strings(names)
	for _, n := range names {
		if len(n) < 6 || n[0] == '.' || !strings.HasSuffix(n, ".conf") {
			continue
		}
		p := path.Join(dir, n)
		st, err := c.h.Stat(p)
		if err != nil {
			c.errorf(from, fromLine, "include_dir %q: %s", p, reason(err, p))
			continue
		}
		if st.IsDir {
			continue
		}
		read(p)
	}
}

// resolve makes an include target absolute: relative names are relative to
// the directory of the including file.
func resolve(dir, name string) string {
	if path.IsAbs(name) {
		return path.Clean(name)
	}
	return path.Join(dir, name)
}

// IsPermission reports whether a configuration error is only a permission
// problem of the observer (not root), not of the configuration.
func IsPermission(msg string) bool {
	return strings.Contains(msg, "permission denied")
}

// reason explains a read error without repeating the path the message
// already names.
func reason(err error, p string) string {
	return strings.TrimPrefix(host.Explain(err), p+": ")
}
