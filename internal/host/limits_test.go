package host

import (
	"testing"
)

const realLimits = `Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max file size             unlimited            unlimited            bytes     
Max data size             unlimited            unlimited            bytes     
Max stack size            8388608              unlimited            bytes     
Max core file size        0                    unlimited            bytes     
Max resident set          unlimited            unlimited            bytes     
Max processes             95977                95977                processes 
Max open files            32768                32768                files     
Max locked memory         8388608              8388608              bytes     
Max address space         unlimited            unlimited            bytes     
Max file locks            unlimited            unlimited            locks     
Max pending signals       95977                95977                signals   
Max msgqueue size         819200               819200               bytes     
Max nice priority         0                    0                    
Max realtime priority     0                    0                    
Max realtime timeout      unlimited            unlimited            us        
`

func TestParseLimits(t *testing.T) {
	l, err := ParseLimits([]byte(realLimits))
	if err != nil {
		t.Fatal(err)
	}
	if got := l[LimitNofile]; got.Soft != 32768 || got.Hard != 32768 || got.Unit != "files" {
		t.Errorf("nofile %+v", got)
	}
	if got := l["Max stack size"]; got.Soft != 8388608 || got.Hard != Unlimited {
		t.Errorf("stack %+v", got)
	}
	if got := l["Max nice priority"]; got.Soft != 0 || got.Unit != "" {
		t.Errorf("nice %+v", got)
	}
	if len(l) != 16 {
		t.Errorf("%d limits, want 16", len(l))
	}
	for _, bad := range []string{"", "garbage", "Limit x\nMax open files  abc  1  files\n", "Limit\nMax open files\n"} {
		if _, err := ParseLimits([]byte(bad)); err == nil {
			t.Errorf("ParseLimits(%q) accepted malformed input", bad)
		}
	}
}

func FuzzParseLimits(f *testing.F) {
	f.Add([]byte(realLimits))
	f.Add([]byte("Limit\nMax open files            1024                 1048576              files\n"))
	f.Add([]byte("Limit  a  b\n\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLimits(b)
		if err != nil {
			return
		}
		for name, r := range l {
			if name == "" {
				t.Fatalf("empty limit name from %q", b)
			}
			_ = FormatLimit(r.Soft)
		}
	})
}
