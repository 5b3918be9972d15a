package mongo

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dbhost/dbhost/internal/conftext"
)

// confLine encodes one setting: a dotted name of plain words, and the
// value as a YAML scalar (plain when YAML reads it back as it is, else
// double-quoted).
func confLine(key, value string) (string, error) {
	if len(key) > maxName {
		return "", errors.New("too long for a setting name")
	}
	for _, part := range strings.Split(key, ".") {
		if !conftext.PlainWord(part) || strings.Contains(part, "-") {
			return "", errors.New("not a setting name")
		}
		if part == "__exec" || part == "__rest" {
			return "", errors.New("an expansion makes the server run a command or fetch a URL")
		}
	}
	if plainScalar(value) {
		return key + " " + value, nil
	}
	if !utf8.ValidString(value) {
		return "", conftext.ErrControl
	}
	// Go's escapes (\n, \x1b, \u202e) are YAML double-quoted escapes too.
	return key + " " + strconv.Quote(value), nil
}

// plainScalar: starts with a letter, digit or '/', holds no character
// YAML gives a meaning (no space, so no ": " or " #", and no ':' at the
// end) and is not null.
func plainScalar(s string) bool {
	if s == "" || !(isAlnum(s[0]) || s[0] == '/') || strings.HasSuffix(s, ":") || s == "null" || s == "Null" || s == "NULL" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && !strings.ContainsRune("_.,:/+=@-", rune(s[i])) {
			return false
		}
	}
	return true
}

// maxName is far above mongod's names and below YAML's 1024-character
// limit on a key.
const maxName = 256

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
