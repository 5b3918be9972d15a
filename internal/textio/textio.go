// Package textio holds the small helpers every renderer and tool runner
// needs for plain text: a writer that keeps its first error, and the end of
// a command's output in one line.
package textio

import (
	"io"
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
