package budget

import (
	"errors"
	"strings"
	"testing"
)

// TestParse: each bad input is refused with an error that names what is
// wrong; good ones give the bytes or percentage meant.
func TestParse(t *testing.T) {
	cases := []struct {
		in      string
		want    []Share
		errSays string
	}{
		{in: "", want: nil},
		{in: "redis:6379=4GiB,postgres:5432=40%", want: []Share{{Instance: "redis:6379", Bytes: 4 << 30}, {Instance: "postgres:5432", Percent: 40}}},
		{in: " redis:6379 = 512M ", want: []Share{{Instance: "redis:6379", Bytes: 512 << 20}}},
		{in: "redis:6379=1.5G", want: []Share{{Instance: "redis:6379", Bytes: 3 << 29}}},
		{in: "redis:6379=2GB", want: []Share{{Instance: "redis:6379", Bytes: 2e9}}},
		{in: "postgres:5432@/srv/pg2=1GiB", want: []Share{{Instance: "postgres:5432@/srv/pg2", Bytes: 1 << 30}}},
		{in: "redis:6379=4GiBs", errSays: `unknown unit "GiBs"`},
		{in: "redis:6379=4 parsecs", errSays: "unknown unit"},
		{in: "redis:6379=", errSays: "not a size"},
		{in: "redis:6379=-1G", errSays: "unknown unit"},
		{in: "redis:6379=0", errSays: "not a size above 0"},
		{in: "redis:6379=100K", errSays: "less than 1 MiB"},
		{in: "redis:6379=1e30", errSays: "unknown unit"},
		{in: "redis:6379=99999999999T", errSays: "too large"},
		{in: "redis:6379=0%", errSays: "not a percentage"},
		{in: "redis:6379=101%", errSays: "not a percentage"},
		{in: "redis:6379=60%,postgres:5432=41%", errSays: "add up to 101%"},
		{in: "redis:6379=1G,redis:6379=2G", errSays: "redis:6379 is given twice"},
		{in: "redis=1G", errSays: `"redis" is not an instance name`},
		{in: "4GiB", errSays: "want NAME=SIZE"},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		if c.errSays != "" {
			if err == nil || !strings.Contains(err.Error(), c.errSays) {
				t.Errorf("Parse(%q) = %v, %v; want an error saying %q", c.in, got, err, c.errSays)
			}
			continue
		}
		if err != nil || len(got) != len(c.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("Parse(%q)[%d] = %+v, want %+v", c.in, i, got[i], c.want[i])
			}
		}
	}
}

// TestCheck: a share naming no instance, or shares above the budget, are
// errors that name the instance or the sizes.
func TestCheck(t *testing.T) {
	names := []string{"postgres:5432", "redis:6379", "redis:6380@/a", "redis:6380@/b"}
	cases := []struct {
		in      string
		total   uint64
		errSays string
	}{
		{in: "redis:6379=4GiB,postgres:5432=40%", total: 10 << 30},
		{in: "redis:6380@/a=1GiB", total: 10 << 30},
		{in: "mysql:3306=1GiB", total: 10 << 30, errSays: "mysql:3306: no such instance on this host (it has postgres:5432, redis:6379"},
		{in: "redis:6380=1GiB", total: 10 << 30, errSays: "names 2 instances"},
		{in: "redis:6379=11GiB", total: 10 << 30, errSays: "add up to 11GiB, more than the 10GiB"},
		{in: "redis:6379=5GiB,postgres:5432=60%", total: 10 << 30, errSays: "add up to 11GiB"},
	}
	for _, c := range cases {
		sh, err := Parse(c.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.in, err)
		}
		err = Check(sh, names, c.total)
		if c.errSays == "" && err != nil || c.errSays != "" && (err == nil || !strings.Contains(err.Error(), c.errSays)) {
			t.Errorf("Check(%q) = %v, want error saying %q", c.in, err, c.errSays)
		}
	}
	sh, _ := Parse("mysql:3306=1GiB")
	if err := Check(sh, names, 1<<40); !errors.Is(err, ErrUnknown) {
		t.Errorf("unknown instance: %v is not ErrUnknown", err)
	}
}

// FuzzParse: whatever Parse accepts renders back to shares it reads the
// same, and percentages never add up past 100.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"redis:6379=4GiB,postgres:5432=40%", "a:1=1.5G", "a:1=50%,b:2=50%", "x:y=3TB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sh, err := Parse(s)
		if err != nil {
			return
		}
		var pct float64
		for _, x := range sh {
			pct += x.Percent
			if x.Percent == 0 && x.Bytes < 1<<20 {
				t.Fatalf("Parse(%q) accepted %+v", s, x)
			}
		}
		if pct > 100 {
			t.Fatalf("Parse(%q): percentages add up to %v", s, pct)
		}
	})
}

func TestFromEnvFile(t *testing.T) {
	v, ok := FromEnvFile("# DBHOST_BUDGET=x:1=1G\nARGS=\"\"\nDBHOST_BUDGET=\"redis:6379=4GiB\"\n")
	if !ok || v != "redis:6379=4GiB" {
		t.Errorf("got %q %v", v, ok)
	}
	if _, ok := FromEnvFile("# DBHOST_BUDGET=redis:6379=4GiB\n"); ok {
		t.Error("a comment is read")
	}
}
