package galera

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseMembers(t *testing.T) {
	got := mustMembers(t, " db1, db2 ,db3,garbd:arbitrator,db4:weight=2:segment=1, arb2:ARBITRATOR:weight=0")
	want := []Member{
		{Name: "db1", Weight: 1}, {Name: "db2", Weight: 1}, {Name: "db3", Weight: 1},
		{Name: "garbd", Weight: 1, Arbitrator: true}, {Name: "db4", Weight: 2, Segment: 1},
		{Name: "arb2", Weight: 0, Arbitrator: true},
	}
	if !reflect.DeepEqual(got.Members, want) {
		t.Errorf("members %+v\nwant %+v", got.Members, want)
	}
	got = mustMembers(t, "4+garbd:segments=3")
	var segs []int
	for _, m := range got.Members {
		segs = append(segs, m.Segment)
	}
	if len(got.Members) != 5 || got.Members[4].Name != "garbd" || !got.Members[4].Arbitrator || !reflect.DeepEqual(segs, []int{0, 1, 2, 0, 2}) {
		t.Errorf("4+garbd:segments=3: %+v", got.Members)
	}
	if l := mustMembers(t, "db1,garbd"); !l.Members[1].Arbitrator {
		t.Error("garbd is an arbitrator by its name")
	}
	for _, bad := range []struct{ spec, msg string }{
		{"", "no members"},
		{"db1,,db2", "empty name"},
		{"db1,db1", "named twice"},
		{"db1:weight=256", "weight"},
		{"db1:weight=-1", "weight"},
		{"db1:weight=x", "weight"},
		{"db1:segment=999", "segment"},
		{"db1:color=red", "unknown attribute"},
		{"db1:arbitrator=yes", "unknown attribute"},
		{"db 1", "name has"},
		{"db\x1b[2J", "name has"},
		{"0", "count"},
		{"3+arb", "count"},
		{"3:segments=4", "segments"},
		{"3:weights=2", "segments"},
		{"99", "count"},
		{"m1,m2,m3,m4,m5,m6,m7,m8,m9,m10,m11,m12,m13,m14,m15,m16,m17", "at most"},
	} {
		if _, err := ParseMembers(bad.spec); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("ParseMembers(%q): %v, want an error with %q", bad.spec, err, bad.msg)
		}
	}
}

func TestParseProviderOptions(t *testing.T) {
	got := ParseProviderOptions("base_dir = /var/lib/mysql/; PC.Weight=2;gmcast.segment = 1 ; novalue; =x; evs.suspect_timeout = PT5S;")
	want := map[string]string{"base_dir": "/var/lib/mysql/", "pc.weight": "2", "gmcast.segment": "1", "evs.suspect_timeout": "PT5S"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"PT5S": 5 * time.Second, " pt1m30s ": 90 * time.Second, "PT0.5S": 500 * time.Millisecond,
		"P1DT2H": 26 * time.Hour, "PT15S": 15 * time.Second, "5": 5 * time.Second, "0.25": 250 * time.Millisecond,
		"PT1H": time.Hour, "P1D": 24 * time.Hour, "PT0S": 0,
	} {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "P", "PT", "5S", "PT5", "P1M", "P1Y", "PT1.2.3S", "PTS", "PT5X", "P5H", "PTT5S", "-5", "PT-5S", "P99999999999DT1S", "NaN"} {
		if d, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", bad, d)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"128M": 128 << 20, "1G": 1 << 30, "134217728": 134217728, " 2g ": 2 << 30, "512K": 512 << 10,
		"1T": 1 << 40, "128MB": 128 << 20, "0": 0, "8 M": 8 << 20,
	} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "M", "B", "-1", "1.5G", "12X", "9999999999999T", "0x10"} {
		if n, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) = %v, want an error", bad, n)
		}
	}
}

func FuzzParseMembers(f *testing.F) {
	for _, s := range []string{"3", "3+garbd", "4:segments=2", "db1,db2,garbd:arbitrator,db4:weight=2:segment=1", "a:weight=0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseMembers(s)
		if err != nil {
			return
		}
		if len(l.Members) == 0 || len(l.Members) > MaxMembers {
			t.Fatalf("%q: %d members", s, len(l.Members))
		}
		seen := map[string]bool{}
		for _, m := range l.Members {
			if seen[m.Name] || m.Name == "" || m.Weight < 0 || m.Weight > MaxWeight {
				t.Fatalf("%q: bad member %+v", s, m)
			}
			seen[m.Name] = true
		}
		tol := Analyze(l)
		if tol.AtOnce < 0 || tol.OneByOne < tol.AtOnce || tol.AtOnce >= len(l.Members) {
			t.Fatalf("%q: at once %d one by one %d", s, tol.AtOnce, tol.OneByOne)
		}
		for _, sc := range Scenarios(l) {
			if p := l.Predict(sc); strings.HasPrefix(p.Why, "not judged") {
				t.Fatalf("%q: %s: %s", s, sc.Name, p.Why)
			}
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"PT5S", "PT1M30S", "PT0.5S", "P1DT2H", "5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := ParseDuration(s); err == nil && d < 0 {
			t.Fatalf("%q: negative %v", s, d)
		}
	})
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"128M", "1G", "134217728", "2g"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := ParseSize(s); err == nil && n < 0 {
			t.Fatalf("%q: negative %d", s, n)
		}
	})
}
