package textio

import (
	"errors"
	"testing"
)

type failAfter struct{ n int }

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("disk full")
	}
	f.n--
	return len(p), nil
}

func TestErrWriterKeepsFirstError(t *testing.T) {
	f := &failAfter{n: 1}
	ew := &ErrWriter{W: f}
	for _, s := range []string{"a", "b", "c"} {
		ew.Write([]byte(s))
	}
	if ew.Err == nil || ew.Err.Error() != "disk full" {
		t.Errorf("Err = %v, want the first failure", ew.Err)
	}
	if f.n != 0 {
		t.Errorf("writes after the error reached the writer")
	}
}

func TestLastLines(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b | c"},
		{"a\n", 3, "a"},
		{"\n\n a \n\n", 1, "a"},
		{"", 2, ""},
	} {
		if got := LastLines(c.in, c.n); got != c.want {
			t.Errorf("LastLines(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func TestOrList(t *testing.T) {
	for want, in := range map[string][]string{"": nil, "a": {"a"}, "a or b": {"a", "b"}, "a, b or c": {"a", "b", "c"}} {
		if got := OrList(in); got != want {
			t.Errorf("OrList(%q) = %q, want %q", in, got, want)
		}
	}
}
