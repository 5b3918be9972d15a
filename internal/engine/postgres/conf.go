package postgres

import (
	"bytes"
	"fmt"
	"strings"
)

// This file is a faithful reading of PostgreSQL's configuration file grammar
// (src/backend/utils/misc/guc-file.l): one "name [=] value" per line, '#'
// comments, single-quoted strings with '' and backslash escapes, unquoted
// words, numbers with unit suffixes. No token spans a line, so the parser
// works line by line, in one pass and without regular expressions: a 50 MB
// file costs one linear scan.

// Directive is one "name = value" line of a configuration file. Include
// directives (include, include_if_exists, include_dir) are directives too;
// the loader acts on them.
type Directive struct {
	Name  string // lower-cased: PostgreSQL compares names case-insensitively
	Value string // with quotes removed and escapes resolved
	Line  int
}

// SyntaxError is a line the server would reject.
type SyntaxError struct {
	Line int
	// Near is the offending token, or "" at the end of the line.
	Near string
}

func (e SyntaxError) String() string {
	if e.Near == "" {
		return fmt.Sprintf("line %d: syntax error near end of line", e.Line)
	}
	return fmt.Sprintf("line %d: syntax error near %q", e.Line, e.Near)
}

// MaxSyntaxErrors is where the server (and this parser) gives up on a file.
const MaxSyntaxErrors = 100

// redactedValue is what a snapshot stores in place of a secret value. It is
// accepted as a value so that a redacted file parses like the original.
const redactedValue = "<redacted>"

// ParseConf parses postgresql.conf syntax and calls fn for every directive in
// file order. It returns the lines that do not parse; like the server, it
// skips such a line and stops after MaxSyntaxErrors of them. truncated
// reports that it stopped early.
func ParseConf(b []byte, fn func(Directive)) (errs []SyntaxError, truncated bool) {
	lineNo := 0
	for len(b) > 0 {
		lineNo++
		var line []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			line, b = b, nil
		}
		d, ok, serr := parseLine(line)
		if serr != nil {
			serr.Line = lineNo
			errs = append(errs, *serr)
			if len(errs) >= MaxSyntaxErrors {
				return errs, len(b) > 0
			}
			continue
		}
		if ok {
			d.Line = lineNo
			fn(d)
		}
	}
	return errs, false
}

// Token kinds of the configuration lexer.
type tokKind int

const (
	tEOL tokKind = iota
	tID
	tQualifiedID
	tString
	tUnquoted
	tInteger
	tReal
	tEquals
	tError
)

// parseLine parses one line: empty/comment (ok false), a directive, or a
// syntax error.
func parseLine(s []byte) (Directive, bool, *SyntaxError) {
	var d Directive
	k, a, e := nextToken(s, 0)
	if k == tEOL {
		return d, false, nil
	}
	if k != tID && k != tQualifiedID {
		return d, false, near(s, k, a, e)
	}
	d.Name = strings.ToLower(string(s[a:e]))
	k, a, e = nextToken(s, e)
	if k == tEquals {
		k, a, e = nextToken(s, e)
	}
	switch k {
	case tID, tUnquoted, tInteger, tReal:
		d.Value = string(s[a:e])
	case tString:
		d.Value = deescape(s[a+1 : e-1])
	default:
		return d, false, near(s, k, a, e)
	}
	if k, a, e = nextToken(s, e); k != tEOL {
		return d, false, near(s, k, a, e)
	}
	return d, true, nil
}

func near(s []byte, k tokKind, a, e int) *SyntaxError {
	if k == tEOL {
		return &SyntaxError{}
	}
	tok := string(s[a:e])
	if len(tok) > 40 {
		tok = tok[:40] + "..."
	}
	return &SyntaxError{Near: tok}
}

// nextToken returns the kind and extent of the token at or after pos. Like
// flex, it takes the longest match; on a tie the rule listed first in
// guc-file.l wins (ID, QUALIFIED_ID, STRING, UNQUOTED_STRING, INTEGER, REAL).
func nextToken(s []byte, pos int) (tokKind, int, int) {
	for pos < len(s) && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\r') {
		pos++
	}
	if pos >= len(s) || s[pos] == '#' {
		return tEOL, pos, pos
	}
	c := s[pos]
	switch {
	case c == '=':
		return tEquals, pos, pos + 1
	case c == '\'':
		if end := scanString(s, pos); end > 0 {
			return tString, pos, end
		}
		return tError, pos, pos + 1
	case isLetter(c):
		return scanWord(s, pos)
	case isDigit(c) || c == '+' || c == '-' || c == '.':
		i, r := scanInteger(s, pos), scanReal(s, pos)
		switch {
		case i < 0 && r < 0:
			return tError, pos, pos + 1
		case i >= r:
			return tInteger, pos, i
		}
		return tReal, pos, r
	case c == '<' && bytes.HasPrefix(s[pos:], []byte(redactedValue)):
		return tUnquoted, pos, pos + len(redactedValue)
	}
	return tError, pos, pos + 1
}

// LETTER is [A-Za-z_\200-\377]: bytes of UTF-8 sequences count as letters.
func isLetter(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// scanString returns the end (after the closing quote) of
// '([^'\\\n]|\\.|”)*', or -1 when the string is not closed on this line.
func scanString(s []byte, pos int) int {
	for i := pos + 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // the escaped byte; at the end of the line the string is open
		case '\'':
			if i+1 < len(s) && s[i+1] == '\'' {
				i++
				continue
			}
			return i + 1
		}
	}
	return -1
}

// scanWord matches ID, QUALIFIED_ID (ID.ID) and UNQUOTED_STRING
// (LETTER followed by letters, digits and -._:/), taking the longest.
func scanWord(s []byte, pos int) (tokKind, int, int) {
	id := pos + 1
	for id < len(s) && (isLetter(s[id]) || isDigit(s[id])) {
		id++
	}
	uq := id
	for uq < len(s) && (isLetter(s[uq]) || isDigit(s[uq]) || strings.IndexByte("-._:/", s[uq]) >= 0) {
		uq++
	}
	if uq == id {
		return tID, pos, id
	}
	if id+1 < len(s) && s[id] == '.' && isLetter(s[id+1]) {
		q := id + 2
		for q < len(s) && (isLetter(s[q]) || isDigit(s[q])) {
			q++
		}
		if q == uq {
			return tQualifiedID, pos, q
		}
	}
	return tUnquoted, pos, uq
}

// scanInteger matches [+-]?([0-9]+|0x[0-9A-Fa-f]+)[a-zA-Z]* and returns its
// end, or -1.
func scanInteger(s []byte, pos int) int {
	i := pos
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	best := -1
	j := i
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	if j > i {
		best = skipAlpha(s, j)
	}
	if i+1 < len(s) && s[i] == '0' && s[i+1] == 'x' {
		j = i + 2
		for j < len(s) && isHex(s[j]) {
			j++
		}
		if j > i+2 {
			best = max(best, skipAlpha(s, j))
		}
	}
	return best
}

func skipAlpha(s []byte, i int) int {
	for i < len(s) && isAlpha(s[i]) {
		i++
	}
	return i
}

// scanReal matches [+-]?[0-9]*\.[0-9]*([Ee][+-]?[0-9]+)? and returns its
// end, or -1.
func scanReal(s []byte, pos int) int {
	i := pos
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	if i >= len(s) || s[i] != '.' {
		return -1
	}
	i++
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		k := i + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		d := k
		for k < len(s) && isDigit(s[k]) {
			k++
		}
		if k > d {
			i = k
		}
	}
	return i
}

// deescape resolves the escapes of a quoted value the way the server does
// (DeescapeQuotedString): \b \f \n \r \t, octal \ooo, ” for a quote, and a
// backslash before any other byte stands for that byte.
func deescape(s []byte) string {
	if bytes.IndexByte(s, '\\') < 0 && bytes.IndexByte(s, '\'') < 0 {
		return string(s)
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			switch e := s[i]; e {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case '0', '1', '2', '3', '4', '5', '6', '7':
				v := int(e - '0')
				for k := 1; k < 3 && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '7'; k++ {
					i++
					v = v*8 + int(s[i]-'0')
				}
				out = append(out, byte(v))
			default:
				out = append(out, e)
			}
		case c == '\'' && i+1 < len(s) && s[i+1] == '\'':
			out = append(out, '\'')
			i++
		default:
			out = append(out, c)
		}
	}
	return string(out)
}
