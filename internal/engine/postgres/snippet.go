package postgres

import (
	"errors"
	"strings"

	"github.com/dbhost/dbhost/internal/conftext"
)

// confLine encodes one postgresql.conf setting: a plain setting name and
// the value as a quoted string, which holds any text but a control
// character (the server reads no token across a line).
func confLine(key, value string) (string, error) {
	switch {
	case !gucName.MatchString(key):
		return "", errors.New("not a setting name")
	case strings.HasPrefix(key, "include"):
		return "", errors.New("an include makes the server read another file")
	case conftext.HasControl(value):
		return "", conftext.ErrControl
	}
	return key + " = '" + strings.NewReplacer(`\`, `\\`, "'", "''").Replace(value) + "'", nil
}
