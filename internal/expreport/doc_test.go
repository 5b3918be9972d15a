package expreport

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

// node is an element of a parsed report. The report is written as
// well-formed XML (every element closed, only XML's entities), so that
// encoding/xml, stricter than an HTML parser, can check its structure.
type node struct {
	name   string
	attr   map[string]string
	kids   []*node
	text   string // character data directly inside
	parent *node
}

func parseDoc(t *testing.T, doc string) *node {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	d.Strict = true
	root := &node{name: "#document"}
	cur := root
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			line, col := d.InputPos()
			lines := strings.Split(doc, "\n")
			ctx := ""
			if line-1 < len(lines) {
				ctx = lines[line-1]
			}
			t.Fatalf("report is not well-formed at %d:%d: %v\n%s", line, col, err, ctx)
		}
		switch x := tok.(type) {
		case xml.StartElement:
			n := &node{name: x.Name.Local, attr: map[string]string{}, parent: cur}
			for _, a := range x.Attr {
				n.attr[a.Name.Local] = a.Value
			}
			cur.kids = append(cur.kids, n)
			cur = n
		case xml.EndElement:
			cur = cur.parent
		case xml.CharData:
			cur.text += string(x)
		}
	}
	if cur != root {
		t.Fatalf("unclosed element %s", cur.name)
	}
	return root
}

// all returns the elements below n (n included) that match.
func (n *node) all(match func(*node) bool) []*node {
	var out []*node
	var walk func(*node)
	walk = func(x *node) {
		if match(x) {
			out = append(out, x)
		}
		for _, k := range x.kids {
			walk(k)
		}
	}
	walk(n)
	return out
}

func named(name string) func(*node) bool { return func(n *node) bool { return n.name == name } }

func (n *node) hasClass(c string) bool {
	for _, f := range strings.Fields(n.attr["class"]) {
		if f == c {
			return true
		}
	}
	return false
}

// textContent is the text of n and its descendants.
func (n *node) textContent() string {
	var b strings.Builder
	var walk func(*node)
	walk = func(x *node) {
		b.WriteString(x.text)
		for _, k := range x.kids {
			walk(k)
		}
	}
	walk(n)
	return b.String()
}

// within reports whether n has an ancestor (or is) an element of one of
// the names.
func (n *node) within(names ...string) bool {
	for x := n; x != nil; x = x.parent {
		for _, name := range names {
			if x.name == name {
				return true
			}
		}
	}
	return false
}

// chart returns the SVG of the named chart, or nil.
func chart(doc *node, name string) *node {
	cs := doc.all(func(n *node) bool { return n.name == "svg" && n.attr["data-chart"] == name })
	if len(cs) > 1 {
		panic("two charts named " + name)
	}
	if len(cs) == 0 {
		return nil
	}
	return cs[0]
}

// render renders both formats and checks what every report must hold:
// well-formed, self-contained, no NaN or infinity shown.
func render(t *testing.T, in Input) (html string, doc *node, md string) {
	t.Helper()
	var h, m bytes.Buffer
	if err := HTML(&h, in); err != nil {
		t.Fatal(err)
	}
	if err := Markdown(&m, in); err != nil {
		t.Fatal(err)
	}
	html, md = h.String(), m.String()
	doc = parseDoc(t, html)
	checkSelfContained(t, html, doc)
	for _, bad := range []string{"NaN", "Inf", "%!"} {
		if strings.Contains(html, bad) {
			i := strings.Index(html, bad)
			t.Errorf("HTML shows %q: …%s…", bad, html[max(0, i-80):min(len(html), i+40)])
		}
		if strings.Contains(md, bad) {
			t.Errorf("Markdown shows %q:\n%s", bad, md)
		}
	}
	return html, doc, md
}

// checkSelfContained fails on anything that would load from elsewhere.
func checkSelfContained(t *testing.T, html string, doc *node) {
	t.Helper()
	low := strings.ToLower(html)
	for _, bad := range []string{"http://", "https://", "//cdn", "@import", "url(", "<script", "<link", "<iframe", "<img", "<object", "<embed"} {
		if strings.Contains(low, bad) {
			t.Errorf("report contains %q", bad)
		}
	}
	for _, n := range doc.all(func(*node) bool { return true }) {
		for k, v := range n.attr {
			switch {
			case k == "src" || k == "srcset" || k == "data" || k == "action" || k == "formaction":
				t.Errorf("<%s %s=%q>: a resource reference", n.name, k, v)
			case k == "href" && !strings.HasPrefix(v, "#"):
				t.Errorf("<%s href=%q>: only in-page links are allowed", n.name, v)
			case strings.HasPrefix(k, "on"):
				t.Errorf("<%s %s>: an event handler", n.name, k)
			}
		}
		if n.name == "script" || n.name == "link" || n.name == "iframe" || n.name == "img" {
			t.Errorf("<%s> element", n.name)
		}
	}
}
