package redis

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dbhost/dbhost/internal/conftext"
)

// confLine encodes one redis.conf directive. The value's words, separated
// by single spaces, are its arguments (bind 127.0.0.1 -::1); a word that
// sdssplitargs would not read back as it is gets double-quoted.
func confLine(key, value string) (string, error) {
	switch {
	case !conftext.PlainWord(key) || strings.Contains(key, "."):
		return "", errors.New("not a directive name")
	case strings.EqualFold(key, "include") || strings.EqualFold(key, "loadmodule"):
		return "", errors.New("makes the server load another file")
	}
	words := strings.Split(value, " ")
	for i, w := range words {
		words[i] = confWord(w)
	}
	return key + " " + strings.Join(words, " "), nil
}

// confWord writes one argument as it is, or in double quotes with the
// escapes sdssplitargs resolves (\xHH for any other byte).
func confWord(w string) string {
	if w != "" && !strings.ContainsAny(w, "\"'\\") && !conftext.HasControl(w) {
		return w
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(w); {
		r, n := utf8.DecodeRuneInString(w[i:])
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == utf8.RuneError && n == 1 || conftext.HasControl(w[i:i+n]):
			for _, c := range []byte(w[i : i+n]) {
				fmt.Fprintf(&b, `\x%02x`, c)
			}
		default:
			b.WriteString(w[i : i+n])
		}
		i += n
	}
	b.WriteByte('"')
	return b.String()
}
