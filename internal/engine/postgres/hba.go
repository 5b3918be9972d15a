package postgres

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"path"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// This file reads pg_hba.conf and pg_ident.conf the way the server's
// src/backend/libpq/hba.c does: records of blank-separated fields, '#'
// comments, double-quoted fields (a quoted keyword is a plain name),
// comma-separated lists, @file inclusion in database and user fields,
// backslash continuation (PostgreSQL 14+) and include, include_if_exists and
// include_dir lines (PostgreSQL 16+), each relative to the including file.

// hbaTypes are the connection types of a record.
var hbaTypes = map[string]bool{"local": true, "host": true, "hostssl": true, "hostnossl": true, "hostgssenc": true, "hostnogssenc": true}

// hbaMethods are the authentication methods the server knows.
var hbaMethods = map[string]bool{
	"trust": true, "reject": true, "scram-sha-256": true, "md5": true, "password": true,
	"gss": true, "sspi": true, "ident": true, "peer": true, "pam": true, "ldap": true,
	"radius": true, "cert": true, "bsd": true,
}

// hbaField is one field: a list of tokens (a comma-separated list, or
// the names of an @file).
type hbaField []engine.HBAToken

// hbaReader reads one authentication file (hba or ident) with its includes.
type hbaReader struct {
	includer
	major int
	// record receives each record's fields with where it was written.
	record func(file string, line int, text string, fields []hbaField)
}

// ReadHBA reads the instance's hba_file (and ident_file) through h. The
// files must belong to root or the server's user: anyone else who can
// write them decides who logs in, and dbhost does not read (or record)
// what such a user points it at.
func ReadHBA(h *host.Host, in *engine.Instance) *engine.PGHBA {
	out := &engine.PGHBA{}
	out.File, out.FileSource = authFile(in, "hba_file", "pg_hba.conf")
	if out.File == "" {
		out.Err = "hba_file is unknown: neither the settings nor the data directory name it"
		return out
	}
	r := &hbaReader{includer: includer{h: h, trust: trustedFile(h, in.UID)}, major: in.Major()}
	r.record = func(file string, line int, text string, fields []hbaField) {
		l, why := parseHBARecord(fields, r.major)
		if why != "" {
			r.errorf(file, line, "%s; the server rejects the whole file (a reload keeps the old rules, a restart fails)", why)
			return
		}
		l.File, l.Line, l.Text = file, line, text
		if redactOptions(&l) {
			l.Text = FormatHBA(l, l.Method) // the raw text holds the secret
		}
		out.Lines = append(out.Lines, l)
	}
	if err := r.trust(out.File); err != nil {
		out.Err = mainFileErr(h, out.File, err)
		return out
	}
	r.read(out.File, "", 0, false, "")
	out.Files = r.Files
	if len(r.Files) == 0 && len(r.Errors) > 0 {
		out.Err = strings.TrimPrefix(r.Errors[0], "cannot read configuration file "+out.File+": ")
		return out
	}
	out.Errors = r.Errors

	readIdent(h, in, out)
	return out
}

// readIdent reads ident_file (user name maps), counting its maps and
// reporting lines the server rejects. Its absence is not an error.
func readIdent(h *host.Host, in *engine.Instance, out *engine.PGHBA) {
	out.IdentFile, _ = authFile(in, "ident_file", "pg_ident.conf")
	if out.IdentFile == "" {
		return
	}
	id := &hbaReader{includer: includer{h: h, trust: trustedFile(h, in.UID)}, major: in.Major()}
	id.record = func(file string, line int, _ string, fields []hbaField) {
		if len(fields) != 3 {
			id.errorf(file, line, "a user name map line needs 3 fields (map, system user, database user), it has %d", len(fields))
			return
		}
		out.IdentMaps++
	}
	id.read(out.IdentFile, "", 0, true, "")
	out.IdentErr = id.Errors
}

// redactOptions replaces secret option values (ldapbindpasswd,
// radiussecrets) so that no output shows them; it reports a change.
func redactOptions(l *engine.HBALine) bool {
	changed := false
	for i, o := range l.Options {
		name, value, _ := strings.Cut(o, "=")
		if r := host.RedactValue(name, value); r != value {
			l.Options[i] = name + "=" + r
			changed = true
		}
	}
	return changed
}

// authFile is the file a setting names, or the data directory's default.
func authFile(in *engine.Instance, setting, def string) (file, source string) {
	if s, ok := in.Setting(setting); ok && s.Value != "" {
		switch {
		case path.IsAbs(s.Value):
			return path.Clean(s.Value), s.Source
		case in.DataDir != "":
			// The server resolves it from its working directory, the data directory.
			return path.Join(in.DataDir, s.Value), s.Source
		}
	}
	if in.DataDir == "" {
		return "", ""
	}
	return path.Join(in.DataDir, def), "default"
}

// mainFileErr says why hba_file itself cannot be read.
func mainFileErr(h *host.Host, file string, err error) string {
	var u untrusted
	switch {
	case errors.As(err, &u):
		return u.Error()
	case errors.Is(err, host.ErrNotLive):
		return "not recorded in this snapshot (collected by a dbhost that did not read pg_hba.conf)"
	case host.IsNotExist(err) && h.Live():
		return "missing: the server does not start without it; it was removed or moved after the start"
	}
	return reason(err, file)
}

// untrusted is why a file is not read.
type untrusted string

func (u untrusted) Error() string { return string(u) }

// trustedFile accepts a file (and a symbolic link to it) only when owned by
// root or the server's user uid.
func trustedFile(h *host.Host, uid int) func(string) error {
	ok := func(fi host.FileInfo) bool { return fi.UID == 0 || fi.UID == uid }
	return func(file string) error {
		fi, err := h.Lstat(file)
		if err != nil {
			return err
		}
		if fi.Mode&fs.ModeSymlink != 0 {
			if !ok(fi) {
				return untrusted(fmt.Sprintf("a symbolic link owned by uid %d, neither root nor the server's user: not followed", fi.UID))
			}
			if fi, err = h.Stat(file); err != nil {
				return err
			}
		}
		if !ok(fi) {
			return untrusted(fmt.Sprintf("owned by uid %d, neither root nor the server's user: not read (that user decides who may log in)", fi.UID))
		}
		return nil
	}
}

// read reads one file and hands its records to r.record; include lines
// (PostgreSQL 16+) are followed here.
func (r *hbaReader) read(file, from string, fromLine int, ifExists bool, directive string) {
	b, ok := r.enter(file, from, fromLine, ifExists, directive)
	if !ok {
		return
	}
	defer r.leave()
	dir := path.Dir(file)
	for _, ll := range logicalLines(b, r.major) {
		fields, why := r.tokenize(ll.text, dir, file, ll.line)
		switch {
		case why != "":
			r.errorf(file, ll.line, "%s", why)
			continue
		case len(fields) == 0:
			continue
		}
		if inc, ok := includeDirective(fields, r.major); ok {
			if len(fields) != 2 || len(fields[1]) != 1 {
				r.errorf(file, ll.line, "%s needs exactly one file name", inc)
				continue
			}
			target := resolve(dir, fields[1][0].Text)
			switch inc {
			case "include_dir":
				r.readDir(target, file, ll.line, func(p string) { r.read(p, file, ll.line, false, "include_dir file") })
			default:
				r.read(target, file, ll.line, inc == "include_if_exists", inc)
			}
			continue
		}
		r.record(file, ll.line, ll.text, fields)
	}
}

// includeDirective reports an include line: PostgreSQL 16+ reads them in
// both files; before, "include" is an unknown connection type.
func includeDirective(fields []hbaField, major int) (string, bool) {
	if major != 0 && major < 16 || len(fields[0]) != 1 || fields[0][0].Quoted {
		return "", false
	}
	switch k := fields[0][0].Text; k {
	case "include", "include_if_exists", "include_dir":
		return k, true
	}
	return "", false
}

// logicalLine is a record's text and the line it starts on.
type logicalLine struct {
	text string
	line int
}

// logicalLines splits a file into lines, joining a line that ends with a
// backslash to the next (PostgreSQL 14+; the backslash and the line break
// are dropped, also inside quotes and comments).
func logicalLines(b []byte, major int) []logicalLine {
	raw := strings.Split(string(b), "\n")
	var out []logicalLine
	for i := 0; i < len(raw); i++ {
		start := i + 1
		s := strings.TrimRight(raw[i], "\r")
		for (major == 0 || major >= 14) && strings.HasSuffix(s, `\`) && i+1 < len(raw) {
			i++
			s = s[:len(s)-1] + strings.TrimRight(raw[i], "\r")
		}
		out = append(out, logicalLine{text: s, line: start})
	}
	return out
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }

// tokenize splits a record into fields. A token ends at a blank or a comma
// outside quotes; a comma continues the field with the next token. @name
// (unquoted) is replaced by the names in that file.
func (r *hbaReader) tokenize(s, dir, file string, line int) ([]hbaField, string) {
	var fields []hbaField
	pos := 0
	for {
		var f hbaField
		for {
			tok, quoted, comma, next, why := nextHBAToken(s, pos)
			if why != "" {
				return nil, why
			}
			pos = next
			if tok == "" && !quoted {
				break
			}
			if !quoted && len(tok) > 1 && tok[0] == '@' {
				f = append(f, r.expandFile(resolve(dir, tok[1:]), file, line)...)
			} else {
				f = append(f, engine.HBAToken{Text: tok, Quoted: quoted})
			}
			if !comma {
				break
			}
		}
		if len(f) == 0 {
			return fields, ""
		}
		fields = append(fields, f)
	}
}

// nextHBAToken reads one token from pos: its text (quotes removed, "" for
// a literal quote inside quotes), whether it was quoted, whether a comma
// ended it, and where reading continues. A '#' outside quotes ends the line.
func nextHBAToken(s string, pos int) (tok string, quoted, comma bool, next int, why string) {
	for pos < len(s) && isBlank(s[pos]) {
		pos++
	}
	var b strings.Builder
	inQuote := false
	for pos < len(s) {
		c := s[pos]
		if !inQuote && (isBlank(c) || c == '#') {
			if c == '#' {
				pos = len(s)
			}
			break
		}
		pos++
		if !inQuote && c == ',' {
			comma = true
			break
		}
		if c == '"' {
			if inQuote && pos < len(s) && s[pos] == '"' {
				b.WriteByte('"')
				pos++
				continue
			}
			inQuote = !inQuote
			quoted = true
			continue
		}
		b.WriteByte(c)
	}
	if inQuote {
		return "", false, false, pos, "unterminated quoted string"
	}
	return b.String(), quoted, comma, pos, ""
}

// expandFile reads the names of an @file: blank- or comma-separated, with
// comments and nested @files, relative to the referencing file.
func (r *hbaReader) expandFile(file, from string, fromLine int) []engine.HBAToken {
	b, ok := r.enter(file, from, fromLine, false, "@file")
	if !ok {
		return nil
	}
	defer r.leave()
	var out []engine.HBAToken
	for _, ll := range logicalLines(b, r.major) {
		fields, why := r.tokenize(ll.text, path.Dir(file), file, ll.line)
		if why != "" {
			r.errorf(file, ll.line, "%s", why)
			continue
		}
		for _, f := range fields {
			out = append(out, f...)
		}
	}
	return out
}

// parseHBARecord checks a record's fields as parse_hba_line does and
// returns it, or why the server rejects it.
func parseHBARecord(fields []hbaField, major int) (engine.HBALine, string) {
	var l engine.HBALine
	if len(fields[0]) != 1 {
		return l, "multiple values specified for connection type"
	}
	l.Type = fields[0][0].Text
	if !hbaTypes[l.Type] || fields[0][0].Quoted {
		return l, fmt.Sprintf("invalid connection type %q", l.Type)
	}
	need := 4
	if l.Type != "local" {
		need = 5
	}
	if len(fields) < need {
		return l, fmt.Sprintf("end-of-line before the authentication method (%s records need %d fields)", l.Type, need)
	}
	l.Databases, l.Users = fields[1], fields[2]
	for _, f := range []hbaField{l.Databases, l.Users} {
		for _, t := range f {
			if why := checkRegex(t, major); why != "" {
				return l, why
			}
		}
	}
	rest := fields[3:]
	if l.Type != "local" {
		addr, used, why := parseHBAAddress(fields[3:])
		if why != "" {
			return l, why
		}
		l.Address = addr
		rest = fields[3+used:]
	}
	if len(rest) == 0 {
		return l, "end-of-line before the authentication method"
	}
	if len(rest[0]) != 1 {
		return l, "multiple values specified for the authentication method"
	}
	l.Method = rest[0][0].Text
	if l.Method == "ident" && l.Type == "local" {
		l.Method = "peer" // the server does the same
	}
	if !hbaMethods[l.Method] {
		return l, fmt.Sprintf("invalid authentication method %q", l.Method)
	}
	if l.Method == "peer" && l.Type != "local" {
		return l, "peer authentication is only supported on local sockets"
	}
	for _, f := range rest[1:] {
		for _, t := range f {
			if !strings.Contains(t.Text, "=") {
				return l, fmt.Sprintf("authentication option %q is not in name=value form", t.Text)
			}
			l.Options = append(l.Options, t.Text)
		}
	}
	return l, ""
}

// checkRegex: a name starting with '/' is a regular expression from
// PostgreSQL 16 on; before, it is a plain name.
func checkRegex(t engine.HBAToken, major int) string {
	if !strings.HasPrefix(t.Text, "/") || major != 0 && major < 16 {
		return ""
	}
	if len(t.Text) == 1 {
		return "empty regular expression"
	}
	return ""
}

// parseHBAAddress reads the address field (and a separate mask field) and
// returns it as a keyword, a CIDR or a host name, with the fields used.
func parseHBAAddress(fields []hbaField) (string, int, string) {
	f := fields[0]
	if len(f) != 1 {
		return "", 0, "multiple values specified for host address"
	}
	t := f[0]
	if !t.Quoted && (t.Text == "all" || t.Text == "samehost" || t.Text == "samenet") {
		return t.Text, 1, ""
	}
	if a, bits, ok := strings.Cut(t.Text, "/"); ok {
		ip := net.ParseIP(a)
		n, err := strconv.Atoi(bits)
		if ip == nil || err != nil || n < 0 || n > addrBits(ip) {
			return "", 0, fmt.Sprintf("invalid IP address or mask %q", t.Text)
		}
		return canonicalCIDR(ip, n), 1, ""
	}
	ip := net.ParseIP(t.Text)
	if ip == nil {
		return t.Text, 1, "" // a host name (".example.com" matches a suffix)
	}
	if len(fields) < 2 || len(fields[1]) != 1 {
		return "", 0, fmt.Sprintf("IP address %q needs a CIDR mask or a mask field", t.Text)
	}
	m := net.ParseIP(fields[1][0].Text)
	if m == nil || (m.To4() == nil) != (ip.To4() == nil) {
		return "", 0, fmt.Sprintf("invalid IP mask %q", fields[1][0].Text)
	}
	mask := net.IPMask(m.To16())
	if ip.To4() != nil {
		mask = net.IPMask(m.To4())
	}
	ones, total := mask.Size()
	if total == 0 {
		return "", 0, fmt.Sprintf("IP mask %q is not contiguous", fields[1][0].Text)
	}
	return canonicalCIDR(ip, ones), 2, ""
}

func addrBits(ip net.IP) int {
	if ip.To4() != nil {
		return 32
	}
	return 128
}

func canonicalCIDR(ip net.IP, bits int) string {
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	return ip.String() + "/" + strconv.Itoa(bits)
}

// HBALocalOnly reports whether a record can match only connections from
// this host: the Unix socket, loopback networks, samehost, localhost.
func HBALocalOnly(l engine.HBALine) bool {
	switch l.Address {
	case "":
		return l.Type == "local"
	case "samehost", "localhost":
		return true
	case "all", "samenet":
		return false
	}
	_, n, err := net.ParseCIDR(l.Address)
	if err != nil {
		return false // a host name other than localhost
	}
	ones, _ := n.Mask.Size()
	if v4 := n.IP.To4(); v4 != nil {
		return v4[0] == 127 && ones >= 8
	}
	return n.IP.Equal(net.IPv6loopback) && ones == 128
}

// HBAEncrypted reports a record that matches only encrypted connections
// (SSL or GSSAPI encryption).
func HBAEncrypted(l engine.HBALine) bool { return l.Type == "hostssl" || l.Type == "hostgssenc" }

// HBAWholeFamily reports which address families a record covers entirely
// (all: both; 0.0.0.0/0: IPv4; ::/0: IPv6).
func HBAWholeFamily(l engine.HBALine) (v4, v6 bool) {
	switch l.Address {
	case "all":
		return true, true
	case "0.0.0.0/0":
		return true, false
	case "::/0":
		return false, true
	}
	return false, false
}

// HBAFamilies reports which address families a record can match.
func HBAFamilies(l engine.HBALine) (v4, v6 bool) {
	_, n, err := net.ParseCIDR(l.Address)
	if err != nil {
		return true, true // keywords and host names
	}
	return n.IP.To4() != nil, n.IP.To4() == nil
}

// HBAAllDatabases reports a record whose database field matches every
// database (the unquoted keyword all).
func HBAAllDatabases(l engine.HBALine) bool {
	for _, t := range l.Databases {
		if !t.Quoted && t.Text == "all" {
			return true
		}
	}
	return false
}

// HBAUserMatch says whether a record's user field matches a role: "yes",
// "no", or "maybe" (a regular expression dbhost does not evaluate).
// memberOf lists the roles the role belongs to, for +group.
func HBAUserMatch(l engine.HBALine, role string, memberOf []string) string {
	res := "no"
	for _, t := range l.Users {
		switch {
		case !t.Quoted && t.Text == "all", role != "" && t.Text == role:
			return "yes"
		case !t.Quoted && strings.HasPrefix(t.Text, "+"):
			for _, g := range memberOf {
				if g == t.Text[1:] {
					return "yes"
				}
			}
			if role != "" && t.Text[1:] == role {
				return "yes"
			}
		case strings.HasPrefix(t.Text, "/") && len(t.Text) > 1:
			res = "maybe"
		}
	}
	return res
}

// FormatHBA writes a record in pg_hba.conf syntax with another method (and
// no options when the method changes: they belong to the old method).
func FormatHBA(l engine.HBALine, method string) string {
	parts := []string{l.Type, joinTokens(l.Databases), joinTokens(l.Users)}
	if l.Address != "" {
		parts = append(parts, l.Address)
	}
	parts = append(parts, method)
	if method == l.Method {
		parts = append(parts, l.Options...)
	}
	return strings.Join(parts, " ")
}

func joinTokens(ts []engine.HBAToken) string {
	out := make([]string, len(ts))
	for i, t := range ts {
		if t.Quoted || strings.ContainsAny(t.Text, " \t,#\"") || t.Text == "" {
			out[i] = `"` + strings.ReplaceAll(t.Text, `"`, `""`) + `"`
		} else {
			out[i] = t.Text
		}
	}
	return strings.Join(out, ",")
}

// AuthDefault is the compiled-in default of the settings the
// authentication checks read: ssl is off; password_encryption is md5
// before PostgreSQL 14 and scram-sha-256 since.
func AuthDefault(name string, major int) string {
	switch name {
	case "ssl":
		return "off"
	case "password_encryption":
		if major > 0 && major < 14 {
			return "md5"
		}
		return "scram-sha-256"
	}
	return ""
}
