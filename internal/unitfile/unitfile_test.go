package unitfile

import (
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	in := "# comment\n[Unit]\nDescription=x\n\n[Service]\n; another comment\nLimitNOFILE = 1024\nExecStart=/bin/sh -c \\\n  'echo a' \\\n# skipped comment\n  'echo b'\nEnvironment=A=1\nLimitNOFILE=\nTasksMax=50%\r\n[Install]\nWantedBy=multi-user.target\n"
	got := Parse([]byte(in))
	want := []Assignment{
		{"Unit", "Description", "x", 3},
		{"Service", "LimitNOFILE", "1024", 7},
		{"Service", "ExecStart", "/bin/sh -c  'echo a'  'echo b'", 8},
		{"Service", "Environment", "A=1", 12},
		{"Service", "LimitNOFILE", "", 13},
		{"Service", "TasksMax", "50%", 14},
		{"Install", "WantedBy", "multi-user.target", 16},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse:\n got %+v\nwant %+v", got, want)
	}
}

func FuzzParseUnitFile(f *testing.F) {
	f.Add("[Service]\nLimitNOFILE=1024:524288\nExecStart=/bin/a \\\n b\n")
	f.Add("[Service]\\\n\\\n#\\")
	f.Add("[\n=\n[Service\nKey\n=value\n")
	f.Add("[Service]\nTasksMax=15%\nLimitNOFILE=\n")
	f.Fuzz(func(t *testing.T, s string) {
		for _, a := range Parse([]byte(s)) {
			if a.Key == "" || a.Line < 1 || a.Section == "" {
				t.Fatalf("bad assignment %+v", a)
			}
			if strings.ContainsAny(a.Key, "\n") {
				t.Fatalf("key with newline %q", a.Key)
			}
		}
	})
}
