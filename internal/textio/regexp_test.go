package textio

import "testing"

func TestLazyRegexp(t *testing.T) {
	re := LazyRegexp(`^([a-z]+)=([0-9]+)$`)
	if !re.MatchString("a=1") || re.MatchString("a=b") {
		t.Fatal("MatchString disagrees with the pattern")
	}
	if m := re.FindStringSubmatch("key=42"); len(m) != 3 || m[1] != "key" || m[2] != "42" {
		t.Fatalf("FindStringSubmatch = %q", m)
	}
	if re.String() != `^([a-z]+)=([0-9]+)$` {
		t.Fatalf("String = %q", re.String())
	}
}

func TestLazyRegexpPanicsOnFirstUse(t *testing.T) {
	re := LazyRegexp(`(`) // a bad pattern costs nothing until it is used
	defer func() {
		if recover() == nil {
			t.Fatal("a bad pattern did not panic on first use")
		}
	}()
	re.MatchString("x")
}
