package mysql

import (
	"bytes"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
)

// This file reads MySQL/MariaDB option files (my.cnf) the way the server's
// mysys library does: [group] sections, "name = value" and bare "name"
// lines, '#' comments (also after a value, outside quotes), ';' comments at
// the start of a line, quoted values with backslash escapes, and the
// !include / !includedir directives. The parser is pure (bytes in, entries
// out); the loader follows includes through a Reader so that it works on a
// live host, a snapshot or a map in a test.

// EntryKind says what one line of an option file is.
type EntryKind int

// Entry kinds.
const (
	EntryOption EntryKind = iota + 1
	EntryInclude
	EntryIncludeDir
)

// Entry is one meaningful line of an option file.
type Entry struct {
	Kind EntryKind
	// Group is the group the line is in, lower-cased ("" before the first
	// group header).
	Group string
	// Name is the option name as written, without leading dashes; Value
	// its value with quotes and escapes resolved. HasValue is false for a
	// bare "name" line (a boolean switched on).
	Name     string
	Value    string
	HasValue bool
	// Path is the argument of !include / !includedir.
	Path string
	Line int
}

// ParseError is a line the server would reject or skip.
type ParseError struct {
	Line int
	Msg  string
	// Fatal: the server refuses to start on it (mysys aborts reading).
	Fatal bool
}

func (e ParseError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// ParseOptions parses one option file. It never fails as a whole: lines it
// cannot read are returned as errors next to the entries it could. It runs
// in time linear in the input, so a huge file cannot hang it.
func ParseOptions(data []byte) ([]Entry, []ParseError) {
	var (
		entries []Entry
		errs    []ParseError
		group   string
		inGroup bool
	)
	lineNo := 0
	for len(data) > 0 {
		var raw []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			raw, data = data[:i], data[i+1:]
		} else {
			raw, data = data, nil
		}
		lineNo++
		ln := string(bytes.TrimRight(raw, "\r"))
		s := strings.TrimLeft(ln, " \t\v\f")
		if s == "" || s[0] == '#' || s[0] == ';' {
			continue
		}
		switch s[0] {
		case '!':
			e, perr := parseDirective(s)
			if perr != "" {
				errs = append(errs, ParseError{Line: lineNo, Msg: perr, Fatal: e.Kind != 0})
				continue
			}
			e.Group, e.Line = group, lineNo
			entries = append(entries, e)
		case '[':
			end := strings.IndexByte(s, ']')
			if end < 0 {
				errs = append(errs, ParseError{Line: lineNo, Msg: fmt.Sprintf("group header %q has no closing ']'", clip(s)), Fatal: true})
				continue
			}
			group = strings.ToLower(strings.TrimSpace(s[1:end]))
			inGroup = true
		default:
			e, perr := parseOption(s)
			if perr != "" {
				errs = append(errs, ParseError{Line: lineNo, Msg: perr})
				continue
			}
			if !inGroup {
				errs = append(errs, ParseError{Line: lineNo, Msg: fmt.Sprintf("option %q before any [group]", e.Name), Fatal: true})
				continue
			}
			e.Group, e.Line = group, lineNo
			entries = append(entries, e)
		}
	}
	return entries, errs
}

// parseDirective reads "!include FILE" and "!includedir DIR". A directive
// without an argument is fatal for the server; an unknown one it skips.
func parseDirective(s string) (Entry, string) {
	for _, d := range []struct {
		word string
		kind EntryKind
	}{{"!includedir", EntryIncludeDir}, {"!include", EntryInclude}} {
		rest, ok := strings.CutPrefix(s, d.word)
		if !ok {
			continue
		}
		if rest != "" && !isSpace(rest[0]) {
			continue // "!includedirx": not this directive
		}
		p := strings.TrimSpace(rest)
		if p == "" {
			return Entry{Kind: d.kind}, fmt.Sprintf("%s without a path", d.word)
		}
		return Entry{Kind: d.kind, Path: p}, ""
	}
	return Entry{}, fmt.Sprintf("unknown directive %q (ignored by the server)", clip(s))
}

// parseOption reads "name", "name = value", "name=value # comment".
func parseOption(s string) (Entry, string) {
	s = stripComment(s)
	name, value, hasValue := strings.Cut(s, "=")
	name = strings.TrimRight(name, " \t\v\f")
	name = strings.TrimLeft(name, "-") // "--port=1" is tolerated
	if name == "" {
		return Entry{}, fmt.Sprintf("option without a name: %q", clip(s))
	}
	if strings.ContainsAny(name, " \t") {
		return Entry{}, fmt.Sprintf("option name %q contains a space (missing '='?)", clip(name))
	}
	e := Entry{Kind: EntryOption, Name: name, HasValue: hasValue}
	if hasValue {
		e.Value = unquote(strings.Trim(value, " \t\v\f"))
	}
	return e, ""
}

// stripComment cuts a line at the first '#' outside quotes, as mysys does.
func stripComment(s string) string {
	var quote byte
	escape := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c == '\'' || c == '"') && !escape {
			switch quote {
			case 0:
				quote = c
			case c:
				quote = 0
			}
		}
		if quote == 0 && c == '#' {
			return s[:i]
		}
		escape = quote != 0 && c == '\\' && !escape
	}
	return s
}

// unquote removes one pair of matching quotes and resolves the escapes the
// server knows (\n \t \r \b \s \" \' \\); any other backslash is kept.
func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		v = v[1 : len(v)-1]
	}
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	b.Grow(len(v))
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\\' || i+1 == len(v) {
			b.WriteByte(c)
			continue
		}
		i++
		switch v[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'b':
			b.WriteByte('\b')
		case 's':
			b.WriteByte(' ')
		case '"', '\'', '\\':
			b.WriteByte(v[i])
		default:
			b.WriteByte('\\')
			b.WriteByte(v[i])
		}
	}
	return b.String()
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r' }

func clip(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}

// Reader is what the loader reads option files through (a *host.Host in
// production, a map in tests).
type Reader interface {
	ReadConfig(path string) ([]byte, error)
	ReadDir(path string) ([]string, error)
}

// Limits of the loader. The server itself stops following includes at depth
// 10; the read cap stops an include graph that fans out without looping.
const (
	MaxIncludeDepth = 10
	maxFileReads    = 500
	maxErrors       = 50
)

// Option is one option line read from a file, with its origin.
type Option struct {
	Group    string
	Name     string
	Value    string
	HasValue bool
	File     string
	Line     int
}

// Source is the option's origin in the "file:PATH:LINE" form of
// engine.Setting.Source.
func (o Option) Source() string { return fmt.Sprintf("file:%s:%d", o.File, o.Line) }

// Loaded is the result of reading a set of option files.
type Loaded struct {
	// Files lists the files read, in the order the server reads them.
	Files []string
	// Options lists every option line in read order (later ones win).
	Options []Option
	// IncludeDirs lists the !includedir directories in read order.
	IncludeDirs []string
	// Errors lists what could not be read or parsed.
	Errors []string
	// Unread: an option file that exists could not be read (permission):
	// what it sets is unknown, and a default may not stand in for it.
	Unread  bool
	reads   int
	dropped int
	reader  Reader
	// ignore, when set, says whether the server would skip a file (a
	// world-writable one) and why.
	ignore func(path string) string
}

// NewLoader returns an empty result that reads through r. ignore may be nil.
func NewLoader(r Reader, ignore func(path string) string) *Loaded {
	return &Loaded{reader: r, ignore: ignore}
}

func (l *Loaded) errorf(format string, a ...any) {
	if len(l.Errors) >= maxErrors {
		l.dropped++
		return
	}
	l.Errors = append(l.Errors, fmt.Sprintf(format, a...))
}

// Finish closes the error list (a count of errors beyond the cap).
func (l *Loaded) Finish() {
	if l.dropped > 0 {
		l.Errors = append(l.Errors, fmt.Sprintf("... and %d more problems", l.dropped))
		l.dropped = 0
	}
}

// Load reads one top-level option file and what it includes. A missing file
// is reported only when required (a --defaults-file); the server skips
// missing default files silently.
func (l *Loaded) Load(file string, required bool) {
	l.load(file, required, nil)
}

func (l *Loaded) load(file string, required bool, stack []string) {
	file = path.Clean(file)
	for _, f := range stack {
		if f == file {
			l.errorf("include loop: %s includes %s again (the server re-reads it until depth %d)", strings.Join(stack, " -> "), file, MaxIncludeDepth)
			return
		}
	}
	if len(stack) >= MaxIncludeDepth {
		l.errorf("include depth %d reached at %s: the server ignores %s", MaxIncludeDepth, stack[len(stack)-1], file)
		return
	}
	if l.reads >= maxFileReads {
		l.errorf("more than %d option file reads: stopped at %s", maxFileReads, file)
		return
	}
	l.reads++
	b, err := l.reader.ReadConfig(file)
	if err != nil {
		if !required && host.IsNotExist(err) {
			return
		}
		if !host.IsNotExist(err) {
			l.Unread = true
		}
		l.errorf("cannot read %s", explainPath(file, err))
		return
	}
	if l.ignore != nil {
		if why := l.ignore(file); why != "" {
			l.errorf("%s is ignored by the server: %s", file, why)
			return
		}
	}
	l.Files = append(l.Files, file)
	entries, perrs := ParseOptions(b)
	for _, pe := range perrs {
		l.errorf("%s:%d: %s", file, pe.Line, pe.Msg)
	}
	stack = append(stack, file)
	for _, e := range entries {
		switch e.Kind {
		case EntryOption:
			l.Options = append(l.Options, Option{Group: e.Group, Name: e.Name, Value: e.Value, HasValue: e.HasValue, File: file, Line: e.Line})
		case EntryInclude:
			p := e.Path
			if !path.IsAbs(p) {
				// The server opens it relative to its working directory at
				// start-up, which is unknown later; the file's directory is
				// the best guess and is reported.
				p = path.Join(path.Dir(file), p)
				l.errorf("%s:%d: relative !include %s is opened relative to the server's start-up directory; assumed %s", file, e.Line, e.Path, p)
			}
			l.load(p, true, stack)
		case EntryIncludeDir:
			l.loadDir(file, e, stack)
		}
	}
}

// loadDir reads every *.cnf file of a directory in name order.
func (l *Loaded) loadDir(from string, e Entry, stack []string) {
	dir := path.Clean(e.Path)
	if !path.IsAbs(dir) {
		dir = path.Join(path.Dir(from), dir)
	}
	if len(stack) >= MaxIncludeDepth {
		l.errorf("include depth %d reached at %s: the server ignores %s", MaxIncludeDepth, from, dir)
		return
	}
	l.IncludeDirs = append(l.IncludeDirs, dir)
	names, err := l.reader.ReadDir(dir)
	if err != nil {
		l.errorf("%s:%d: cannot read !includedir %s", from, e.Line, explainPath(dir, err))
		return
	}
	sort.Strings(names)
	for _, n := range names {
		if !strings.HasSuffix(n, ".cnf") {
			continue
		}
		l.load(path.Join(dir, n), true, stack)
	}
}

// explainPath says why p could not be read, naming p once.
func explainPath(p string, err error) string {
	msg := host.Explain(err)
	if strings.HasPrefix(msg, p+":") {
		return msg
	}
	return p + ": " + msg
}
