package postgres

import (
	"path"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
)

// Origin splits a PostgreSQL setting's Source into its kind and, for
// settings a file assigned, the file and line. Kinds: "file" (read from the
// files), "cmdline", "default" (compiled-in), "live" (read from the server;
// file and line set when pg_settings showed them), "".
func Origin(s engine.Setting) (kind, file string, line int) {
	src := s.Source
	switch {
	case src == "cmdline" || src == "live:cmdline":
		return "cmdline", "", 0
	case src == "default":
		return "default", "", 0
	case strings.HasPrefix(src, "file:"):
		kind, src = "file", strings.TrimPrefix(src, "file:")
	case strings.HasPrefix(src, "live:"):
		kind, src = "live", strings.TrimPrefix(src, "live:")
	case src == "live":
		return "live", "", 0
	default:
		return "", "", 0
	}
	if i := strings.LastIndexByte(src, ':'); i > 0 {
		if n, err := strconv.Atoi(src[i+1:]); err == nil {
			return kind, src[:i], n
		}
	}
	return kind, src, 0
}

// SnippetOverridden tells whether a file written as snippet (normally
// IncludeDir/NAME.conf) could NOT change a setting because something the
// server reads later sets it: the command line (-c), postgresql.auto.conf
// (ALTER SYSTEM), a file of the include directory that sorts after the
// snippet, or a file read after the include directory. It returns what
// overrides it. A fix that writes a snippet for such a setting must also
// say how to remove the overriding assignment (ALTER SYSTEM RESET name;
// editing the unit's command line).
func SnippetOverridden(in *engine.Instance, name, snippet string) (string, bool) {
	s, ok := in.Setting(name)
	if !ok {
		return "", false
	}
	kind, file, line := Origin(s)
	switch {
	case kind == "cmdline":
		return "the server's command line (-c " + engine.NormalizeName(name) + "=...)", true
	case file == "":
		return "", false
	case path.Base(file) == AutoConf:
		return file + " (ALTER SYSTEM; undo with ALTER SYSTEM RESET " + engine.NormalizeName(name) + ")", true
	}
	where := file
	if line > 0 {
		where += ":" + strconv.Itoa(line)
	}
	dir := path.Dir(snippet)
	if path.Dir(file) == dir {
		if path.Base(file) > path.Base(snippet) {
			return where, true
		}
		return "", false
	}
	// A file read after the whole include directory wins too.
	last := -1
	for i, f := range in.ConfigFiles {
		if path.Dir(f) == dir {
			last = i
		}
	}
	if last < 0 {
		return "", false
	}
	for i := last + 1; i < len(in.ConfigFiles); i++ {
		if in.ConfigFiles[i] == file {
			return where, true
		}
	}
	return "", false
}

// Bool reads a boolean setting the way PostgreSQL does (on/off, true/false,
// yes/no, 1/0 and unique prefixes); ok is false when the setting is absent
// or not a boolean.
func Bool(in *engine.Instance, name string) (value, ok bool) {
	s, found := in.Setting(name)
	if !found {
		return false, false
	}
	v := strings.ToLower(strings.TrimSpace(s.Value))
	switch {
	case v == "on" || v == "1" || v != "" && (strings.HasPrefix("true", v) || strings.HasPrefix("yes", v)):
		return true, true
	case v == "off" || v == "of" || v == "0" || v != "" && (strings.HasPrefix("false", v) || strings.HasPrefix("no", v)):
		return false, true
	}
	return false, false
}
