package engine

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/dbhost/dbhost/internal/conftext"
)

// What every engine's ConfigSnippet shares: the file of lines to merge, and
// the loop that writes entries through the engine's own line encoder,
// leaving out (and reporting) what the encoder refuses.

// Merge renders s as a file of lines next to the main configuration, for a
// person to merge, each line encoded by line.
func (s Snippet) Merge(line func(key, value string) (string, error)) (string, string) {
	dir := s.Dir
	if dir == "" && s.File != "" {
		dir = path.Dir(s.File)
	}
	if dir == "" {
		dir = "/etc"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Merge into %s (restart to apply).\n", conftext.Comment(s.File))
	s.WriteEntries(&b, "\n", line)
	return path.Join(dir, s.Name+"-"+FileStem(s.Instance)+".conf"), b.String()
}

// plainLine is "key value" for an engine whose syntax dbhost does not
// know: a plain key and a value without control characters.
func plainLine(key, value string) (string, error) {
	if !conftext.PlainWord(key) {
		return "", errors.New("not a plain setting name")
	}
	if conftext.HasControl(value) {
		return "", conftext.ErrControl
	}
	return key + " " + value, nil
}

// WriteEntries writes each entry as lead, its findings as a comment, and
// the line encoded by line. An entry line refuses is left out and passed
// to s.Refuse.
func (s Snippet) WriteEntries(b *strings.Builder, lead string, line func(key, value string) (string, error)) {
	for _, e := range s.Entries {
		l, err := line(e.Key, e.Value)
		if err != nil {
			if s.Refuse != nil {
				s.Refuse(e, err.Error())
			}
			continue
		}
		b.WriteString(lead + "# " + conftext.Comment(strings.Join(e.Tags, ", ")) + "\n" + l + "\n")
	}
}

// FileStem makes an instance name safe as part of a file name: anything
// but letters, digits, '.', '_' and '-' becomes '-' ("redis:6379" is
// "redis-6379"), so a name can never leave the directory; a long name is
// cut and told apart by a hash of it.
func FileStem(name string) string {
	s := strings.Map(func(r rune) rune {
		if conftext.WordRune(r) {
			return r
		}
		return '-'
	}, name)
	if len(s) > maxStem {
		s = fmt.Sprintf("%s-%x", s[:maxStem-17], sha256.Sum256([]byte(name)))[:maxStem]
	}
	return s
}

// maxStem keeps a snippet's file name well below NAME_MAX (255 bytes).
const maxStem = 100
