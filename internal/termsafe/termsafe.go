// Package termsafe keeps data from controlling root's terminal. dbhost
// prints what other users control — process arguments, data directory
// names, configuration values, snapshot contents — and a terminal obeys
// escape sequences wherever they come from: set the window title, clear the
// screen, move the cursor back over a line, or reorder text (Unicode bidi
// overrides). Every human-readable output goes through a Writer, which
// shows such characters as visible escapes (\x1b, \u202e). The only
// sequences that reach the terminal raw are dbhost's own colour codes (when
// colour is on) and cursor controls passed explicitly with Control.
package termsafe

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Colours are the SGR sequences dbhost's renderers use. With colour on, a
// Writer passes exactly these through: at worst a value can change the
// colour of what follows it, never move, hide or erase anything.
var Colours = []string{"\x1b[0m", "\x1b[1m", "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[34m", "\x1b[90m"}

// Cursor controls that only dbhost's own code emits, through Control.
const (
	EraseLine   = "\r\x1b[K"      // progress bars redraw their line
	ClearScreen = "\x1b[H\x1b[2J" // --watch redraws the screen
)

// Escape returns s with every character that could control a terminal
// written as a visible escape: C0 controls except newline and tab, DEL, C1
// controls, invalid UTF-8 bytes, and the Unicode characters that reorder
// or separate text.
func Escape(s string) string {
	if clean(s) {
		return s
	}
	var b bytes.Buffer
	escapeTo(&b, []byte(s), false, true)
	return b.String()
}

// clean is the fast path: most strings hold nothing to escape.
func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f || c >= 0x80 {
			return false
		}
	}
	return true
}

// dangerous reports a rune that is escaped although it is valid UTF-8.
func dangerous(r rune) bool {
	switch {
	case r < 0x20:
		return r != '\n' && r != '\t'
	case r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069,
		r == 0x2028, r == 0x2029, r == 0xfeff:
		return true
	}
	return false
}

var named = map[rune]string{'\r': `\r`, '\a': `\a`, '\b': `\b`, '\f': `\f`, '\v': `\v`}

func escRune(b *bytes.Buffer, r rune) {
	switch {
	case named[r] != "":
		b.WriteString(named[r])
	case r < 0x80:
		fmt.Fprintf(b, `\x%02x`, r)
	default:
		fmt.Fprintf(b, `\u%04x`, r)
	}
}

// escapeTo appends p to b escaped and returns how many bytes at the end it
// left unread because they may be the start of a rune or colour code that
// the next write completes (only when final is false).
func escapeTo(b *bytes.Buffer, p []byte, colour, final bool) int {
	i := 0
	for i < len(p) {
		c := p[i]
		if c == 0x1b && colour {
			if n, partial := colourAt(p[i:]); n > 0 {
				b.Write(p[i : i+n])
				i += n
				continue
			} else if partial && !final {
				return len(p) - i
			}
		}
		if c < utf8.RuneSelf {
			if dangerous(rune(c)) {
				escRune(b, rune(c))
			} else {
				b.WriteByte(c)
			}
			i++
			continue
		}
		if !final && !utf8.FullRune(p[i:]) {
			return len(p) - i
		}
		r, size := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(b, `\x%02x`, p[i])
		case dangerous(r):
			escRune(b, r)
		default:
			b.Write(p[i : i+size])
		}
		i += size
	}
	return 0
}

// colourAt matches one of Colours at the start of p; partial reports that
// p ends inside what could still become one.
func colourAt(p []byte) (n int, partial bool) {
	for _, c := range Colours {
		if bytes.HasPrefix(p, []byte(c)) {
			return len(c), false
		}
		if len(p) < len(c) && strings.HasPrefix(c, string(p)) {
			partial = true
		}
	}
	return 0, partial
}

// Writer escapes what is written through it (see Escape). It is not safe
// for concurrent use.
type Writer struct {
	w      io.Writer
	colour bool
	carry  []byte // an incomplete rune or colour code from the last Write
	buf    bytes.Buffer
}

// New wraps w. With colour, dbhost's own colour codes pass through.
func New(w io.Writer, colour bool) *Writer {
	if t, ok := w.(*Writer); ok {
		w = t.w
	}
	return &Writer{w: w, colour: colour}
}

// Write escapes p. A rune or colour code split across writes is held back
// until the next write completes it (or Flush).
func (t *Writer) Write(p []byte) (int, error) {
	in := p
	if len(t.carry) > 0 {
		in = append(t.carry, p...)
		t.carry = nil
	}
	t.buf.Reset()
	if left := escapeTo(&t.buf, in, t.colour, false); left > 0 {
		t.carry = append([]byte(nil), in[len(in)-left:]...)
	}
	if _, err := t.w.Write(t.buf.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes, escaped, what an earlier Write held back.
func (t *Writer) Flush() error {
	if len(t.carry) == 0 {
		return nil
	}
	t.buf.Reset()
	escapeTo(&t.buf, t.carry, t.colour, true)
	t.carry = nil
	_, err := t.w.Write(t.buf.Bytes())
	return err
}

// Control writes one of dbhost's cursor controls (EraseLine, ClearScreen)
// raw. Anything else is escaped like data.
func (t *Writer) Control(seq string) error {
	if err := t.Flush(); err != nil {
		return err
	}
	if seq != EraseLine && seq != ClearScreen {
		_, err := t.Write([]byte(seq))
		return err
	}
	_, err := io.WriteString(t.w, seq)
	return err
}

// Control writes a cursor control to w: through its Control method when w
// is a Writer, else as is (w is then not a terminal dbhost set up).
func Control(w io.Writer, seq string) error {
	if t, ok := w.(*Writer); ok {
		return t.Control(seq)
	}
	_, err := io.WriteString(w, seq)
	return err
}

// Raw returns the writer beneath a Writer, for output that is not for a
// terminal's eyes and escapes itself (JSON, Prometheus text, archives,
// HTML), or w itself.
func Raw(w io.Writer) io.Writer {
	if t, ok := w.(*Writer); ok {
		t.Flush()
		return t.w
	}
	return w
}

// Line is Escape for text that must stay on one line (a name, a path in a
// label or a comment): newline and tab are escaped too.
func Line(s string) string {
	if !strings.ContainsAny(s, "\n\t") {
		return Escape(s)
	}
	s = Escape(s)
	return strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(s)
}
