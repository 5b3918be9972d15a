package host

import (
	"context"
	"os/exec"
	"testing"
)

// A command runs once per host, user and group: a second ask gets the
// first answer (date's nanoseconds would differ).
func TestRunOnce(t *testing.T) {
	if _, err := exec.LookPath("date"); err != nil {
		t.Skip(err)
	}
	h, err := Open("/")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := h.Run(ctx, "date", "+%s%N")
	if err != nil {
		t.Skip("date not runnable here:", err)
	}
	b, err := h.Run(ctx, "date", "+%s%N")
	if err != nil || string(a) != string(b) {
		t.Errorf("second run %q, %v; first %q", b, err, a)
	}
	if h2, _ := Open("/"); h2 != nil {
		if c, _ := h2.Run(ctx, "date", "+%s%N"); string(c) == string(a) {
			t.Errorf("another host got the first one's answer %q", c)
		}
	}
}
