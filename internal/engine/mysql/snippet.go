package mysql

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/dbhost/dbhost/internal/conftext"
)

// optionLine encodes one option-file line: a plain option name, and the
// value as written when mysys reads it back unchanged, else double-quoted
// with the escapes mysys resolves.
func optionLine(key, value string) (string, error) {
	if !optionName(key) {
		return "", errors.New("not an option name")
	}
	if plainValue(value) {
		return key + " = " + value, nil
	}
	q, err := quoteOption(value)
	if err != nil {
		return "", err
	}
	return key + " = " + q, nil
}

// optionName: letters, digits, '_' and '-', not starting with '-' (the
// loose- and maximum- prefixes are names of this form).
func optionName(s string) bool {
	return conftext.PlainWord(s) && !strings.Contains(s, ".")
}

// plainValue: nothing mysys would strip, unquote, unescape or cut at a
// comment.
func plainValue(s string) bool {
	return !strings.ContainsAny(s, " #'\"\\") && !conftext.HasControl(s)
}

// quoteOption double-quotes s with mysys's escapes; the control characters
// it has no escape for cannot be written.
func quoteOption(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", conftext.ErrControl
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '\\', '"':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		case '\b':
			b.WriteString(`\b`)
		default:
			if conftext.HasControl(string(r)) {
				return "", conftext.ErrControl
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String(), nil
}
