package conftext

import "testing"

// TestComment: every character that could end or disguise a comment's line
// is shown escaped; ordinary text is kept as it is.
func TestComment(t *testing.T) {
	for in, want := range map[string]string{
		"postgres:5432 (/var/lib/pg)": "postgres:5432 (/var/lib/pg)",
		"a\nb\rc\x00d\te":             `a\nb\rc\x00d\te`,
		"\x1b[2J\x7f":                 `\x1b[2J\x7f`,
		"\xff\u0085\u2028\u202e":      `\xff\u0085\u2028\u202e`,
		"trail\\":                     "trail\\",
		"é":                           "é",
	} {
		if got := Comment(in); got != want {
			t.Errorf("Comment(%q) = %q, want %q", in, got, want)
		}
		if HasControl(in) != (in != want) {
			t.Errorf("HasControl(%q) = %v", in, HasControl(in))
		}
	}
}

// TestPlainWord: letters, digits, '.', '_' and '-', not leading '.' or '-'.
func TestPlainWord(t *testing.T) {
	for s, want := range map[string]bool{"vm": true, "fs.file-max": true, "a_1": true, "": false, "-a": false, ".a": false, "a b": false, "a/b": false, "é": false} {
		if PlainWord(s) != want {
			t.Errorf("PlainWord(%q) = %v", s, !want)
		}
	}
}
