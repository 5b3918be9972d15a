// Package textio holds the small helpers every renderer and tool runner
// needs for plain text: a writer that keeps its first error, and the end of
// a command's output in one line.
package textio

import (
	"io"
	"strconv"
	"strings"
)

// ErrWriter keeps the first write error, so that rendering code can write
// line after line and check once at the end. After an error it writes
// nothing more.
type ErrWriter struct {
	W   io.Writer
	Err error
}

func (e *ErrWriter) Write(p []byte) (int, error) {
	if e.Err != nil {
		return len(p), nil
	}
	n, err := e.W.Write(p)
	e.Err = err
	return n, err
}

// LastLines joins the last n lines of s with " | ": a command's output
// end, for an error message.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// OrList joins choices for a message: "a", "a or b", "a, b or c".
func OrList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// UnescapeOctal undoes the octal escapes of /proc/*/mountinfo and
// /etc/fstab (\040 for a space, \011 a tab, \012 a newline, \134 a
// backslash); anything else is kept as it is.
func UnescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
