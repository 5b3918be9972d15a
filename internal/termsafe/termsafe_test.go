package termsafe

import (
	"bytes"
	"strings"
	"testing"
)

func TestEscape(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain text, tabs\tand newlines\n", "plain text, tabs\tand newlines\n"},
		{"/var/lib/pgsql/données", "/var/lib/pgsql/données"},
		{"\x1b]0;pwned\x07", `\x1b]0;pwned\a`},
		{"\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},
		{"ok\rFAKE", `ok\rFAKE`},
		{"a\u009bb", `a\u009bb`},                 // C1 CSI as a rune
		{"a\x9bb", `a\x9bb`},                     // the same byte, invalid UTF-8
		{"evil\u202etxt.sh", `evil\u202etxt.sh`}, // right-to-left override
		{"\u2066x\u2069", `\u2066x\u2069`},
		{"del\x7f", `del\x7f`},
		{"nul\x00", `nul\x00`},
		{"\x1b[31mred", `\x1b[31mred`}, // data colours are escaped too
	}
	for _, c := range cases {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestWriter(t *testing.T) {
	var b bytes.Buffer
	w := New(&b, false)
	w.Write([]byte("data \x1b]0;x\x07 \x1b[31mred\x1b[0m\n"))
	if got := b.String(); got != `data \x1b]0;x\a \x1b[31mred\x1b[0m`+"\n" {
		t.Errorf("colour off: %q", got)
	}

	b.Reset()
	w = New(&b, true)
	w.Write([]byte("\x1b[1m\x1b[31mFAIL\x1b[0m \x1b[2J \x1b]8;;http://x\x07\n"))
	if got := b.String(); got != "\x1b[1m\x1b[31mFAIL\x1b[0m "+`\x1b[2J \x1b]8;;http://x\a`+"\n" {
		t.Errorf("colour on: %q", got)
	}

	// A rune and a colour code split across writes.
	b.Reset()
	w = New(&b, true)
	e := []byte("é\u202e")
	w.Write([]byte("x\x1b[3"))
	w.Write([]byte("1m"))
	w.Write(e[:1])
	w.Write(e[1:3])
	w.Write(e[3:])
	w.Write([]byte{0xe2})
	w.Flush()
	if got := b.String(); got != "x\x1b[31mé"+`\u202e\xe2` {
		t.Errorf("split writes: %q", got)
	}

	// Cursor controls pass only through Control.
	b.Reset()
	w = New(&b, false)
	w.Write([]byte(EraseLine))
	Control(w, EraseLine)
	w.Control("\x1b]0;title\x07")
	if got := b.String(); got != `\r\x1b[K`+EraseLine+`\x1b]0;title\a` {
		t.Errorf("controls: %q", got)
	}
	if Raw(w) != &b || Raw(&b) != &b {
		t.Error("Raw does not unwrap")
	}
}

func TestCleanFastPath(t *testing.T) {
	s := strings.Repeat("postgres:5432 vm.swappiness = 60\n", 100)
	if Escape(s) != s {
		t.Error("clean text changed")
	}
}
