package report_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/dbhost/dbhost/internal/report"
)

func TestFormats(t *testing.T) {
	var f report.Formats[int]
	f.Add("text", func(w io.Writer, n int) error { _, err := fmt.Fprintf(w, "n=%d", n); return err }).
		Add("json", func(w io.Writer, n int) error { _, err := fmt.Fprintf(w, `{"n":%d}`, n); return err }).
		Add("markdown", func(w io.Writer, n int) error { _, err := fmt.Fprintf(w, "**%d**", n); return err }, "md")

	if got, want := f.Names(), []string{"text", "json", "markdown"}; !slices.Equal(got, want) {
		t.Errorf("Names() = %q, want %q (added order, no aliases)", got, want)
	}
	f.Names()[0] = "changed"
	if f.Names()[0] != "text" {
		t.Error("Names() returned the set's own slice")
	}

	for _, c := range []struct{ name, want string }{
		{"text", "n=7"}, {"json", `{"n":7}`}, {"markdown", "**7**"}, {"md", "**7**"},
	} {
		if err := f.Check(c.name); err != nil {
			t.Errorf("Check(%q) = %v", c.name, err)
		}
		var buf bytes.Buffer
		if err := f.Render(&buf, c.name, 7); err != nil || buf.String() != c.want {
			t.Errorf("Render(%q) = %q, %v; want %q", c.name, buf.String(), err, c.want)
		}
	}

	// Unknown names, also a different case of a known one, are refused by
	// Check and Render with the same error, and nothing is written.
	for _, name := range []string{"yaml", "", "TEXT", "Markdown"} {
		want := fmt.Sprintf("unknown format %q (want text, json or markdown)", name)
		if err := f.Check(name); err == nil || err.Error() != want {
			t.Errorf("Check(%q) = %v, want %s", name, err, want)
		}
		var buf bytes.Buffer
		if err := f.Render(&buf, name, 7); err == nil || err.Error() != want || buf.Len() != 0 {
			t.Errorf("Render(%q) = %v, wrote %q; want %s and nothing", name, err, buf.String(), want)
		}
	}

	// A renderer's own error comes back unchanged.
	boom := errors.New("boom")
	var g report.Formats[string]
	g.Add("text", func(io.Writer, string) error { return boom })
	if err := g.Render(io.Discard, "text", ""); err != boom {
		t.Errorf("Render: %v, want the renderer's error", err)
	}
	if err := g.Check("json"); err == nil || err.Error() != `unknown format "json" (want text)` {
		t.Errorf("one-format set: %v", err)
	}
}

func TestFormatsAddTwicePanics(t *testing.T) {
	for _, c := range []struct {
		what string
		add  func(*report.Formats[int])
	}{
		{"name", func(f *report.Formats[int]) { f.Add("text", nil) }},
		{"alias of another", func(f *report.Formats[int]) { f.Add("markdown", nil, "txt") }},
		{"alias naming a format", func(f *report.Formats[int]) { f.Add("markdown", nil, "text") }},
	} {
		t.Run(c.what, func(t *testing.T) {
			var f report.Formats[int]
			f.Add("text", nil, "txt")
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			c.add(&f)
		})
	}
}

// TestAuditFormats: the audit's renderers are one Formats, listed as the
// audit's --format help and error have always listed them.
func TestAuditFormats(t *testing.T) {
	if got, want := report.AuditFormats.Names(), []string{"json", "prom", "text"}; !slices.Equal(got, want) {
		t.Errorf("AuditFormats.Names() = %q, want %q", got, want)
	}
	a := audit(t, "baseline")
	err := report.Render(io.Discard, "yaml", a, report.Options{})
	if err == nil || err.Error() != `unknown format "yaml" (want json, prom or text)` {
		t.Errorf("Render yaml: %v", err)
	}
	if err := report.AuditFormats.Check("prom"); err != nil {
		t.Errorf("Check(prom): %v", err)
	}
	var viaSet, viaRender bytes.Buffer
	if err := report.AuditFormats.Render(&viaSet, "json", report.Rendering{Audit: a}); err != nil {
		t.Fatal(err)
	}
	if err := report.Render(&viaRender, "json", a, report.Options{}); err != nil {
		t.Fatal(err)
	}
	if viaSet.Len() == 0 || !bytes.Equal(viaSet.Bytes(), viaRender.Bytes()) {
		t.Error("AuditFormats.Render and Render differ")
	}
}
