// Package conftext holds what every configuration format dbhost writes
// shares: the encoder for '#' comment text, the check for control
// characters no format may carry raw, and plain words. Strings from the
// host reach root's files through these (fix, and the engines' snippets).
package conftext

import (
	"errors"
	"strings"

	"github.com/dbhost/dbhost/internal/termsafe"
)

// Comment returns s fit for the text of a '#' comment: newlines, tabs and
// every other control character, DEL, invalid UTF-8 and the characters that
// reorder text become visible escapes (\n, \x1b), so a value from the host
// can never end the comment's line and start a setting.
func Comment(s string) string {
	if printableASCII(s) {
		return s
	}
	return lineEscapes.Replace(termsafe.Escape(s))
}

// lineEscapes writes the two controls termsafe.Escape keeps.
var lineEscapes = strings.NewReplacer("\n", `\n`, "\t", `\t`)

// printableASCII is Comment's fast path: nothing to escape.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// HasControl reports whether s holds anything Comment would escape: no
// configuration syntax dbhost writes may carry it raw.
func HasControl(s string) bool { return Comment(s) != s }

// ErrControl refuses a value holding a control character.
var ErrControl = errors.New("holds a control character or invalid UTF-8")

// PlainWord reports whether s is a non-empty run of letters, digits, '.',
// '_' and '-' that starts with neither '.' nor '-': no syntax reads it as
// anything but a word.
func PlainWord(s string) bool {
	return s != "" && s[0] != '.' && s[0] != '-' && strings.IndexFunc(s, func(r rune) bool { return !WordRune(r) }) < 0
}

// WordRune: an ASCII letter or digit, '.', '_' or '-'.
func WordRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}
