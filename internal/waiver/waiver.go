// Package waiver reads the waiver file (/etc/dbhost/waivers.yaml): the
// findings an operator accepts on a host, each with a reason and, best, an
// expiry. A waived finding keeps the status its check gave it; it is shown
// apart from the live failures, counts toward no exit status or failure
// count, and gets no fix. An expired waiver no longer applies.
package waiver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/dbhost/dbhost/internal/check"
)

// DefaultPath is the waiver file read when no --waivers names another.
const DefaultPath = "/etc/dbhost/waivers.yaml"

// MaxSize bounds the file: a waiver is a few lines, and a snapshot records
// the file (it may come from anywhere).
const MaxSize = 256 << 10

// Limits of one entry's fields.
const (
	maxReason  = 500
	maxSubject = 256
	maxHost    = 253
)

// Entry is one waiver: a check on a subject (or every subject, "*"),
// optionally on one host only, accepted for a reason until it expires.
type Entry struct {
	Check   string    `json:"check"`
	Subject string    `json:"subject"`
	Host    string    `json:"host,omitempty"`
	Reason  string    `json:"reason"`
	Expires time.Time `json:"expires,omitzero"`
	// Where is the file and line the entry starts on.
	Where string `json:"where"`
}

// File is a parsed waiver file.
type File struct {
	// Name is the file as shown in messages and Waiver.Source.
	Name    string
	Entries []Entry
}

var keys = []string{"check", "subject", "host", "reason", "expires"}

// Parse reads a waiver file's content; name is the file as the user knows
// it. Every error names the file and line. The layout:
//
//	waivers:
//	  - check: pg.hardening.hba_trust
//	    subject: postgres:5432
//	    reason: replication from 10.0.0.0/24, firewalled (TICKET-123)
//	    expires: 2026-12-31
//
// An empty file, or an empty list, waives nothing.
func Parse(name string, data []byte) (*File, error) {
	f := &File{Name: name}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%s: %d bytes, more than a waiver file's %d", name, len(data), MaxSize)
	}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%s: not UTF-8 text", name)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return f, nil // empty, or only comments
		}
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		return nil, fmt.Errorf("%s:%d: a second YAML document: a waiver file holds one", name, more.Line)
	}
	at := func(n *yaml.Node, format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", name, n.Line, fmt.Sprintf(format, args...))
	}
	if err := noAliases(&doc, at); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return f, nil
	}
	top := doc.Content[0]
	if top.Kind == yaml.ScalarNode && top.Tag == "!!null" {
		return f, nil
	}
	if top.Kind != yaml.MappingNode {
		return nil, at(top, "want a mapping with one key, waivers: a list of {check, subject, reason, expires}")
	}
	var list *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if k.Value != "waivers" {
			return nil, at(k, "unknown key %q (the file has one key, waivers)", k.Value)
		}
		if list != nil {
			return nil, at(k, "waivers given twice")
		}
		list = v
	}
	if list == nil || (list.Kind == yaml.ScalarNode && list.Tag == "!!null") {
		return f, nil
	}
	if list.Kind != yaml.SequenceNode {
		return nil, at(list, "waivers: want a list of {check, subject, reason, expires}")
	}
	seen := map[string]string{}
	for _, n := range list.Content {
		e, err := entry(n, at)
		if err != nil {
			return nil, err
		}
		e.Where = fmt.Sprintf("%s:%d", name, n.Line)
		k := e.Check + "\x00" + e.Subject + "\x00" + strings.ToLower(e.Host)
		if prev, dup := seen[k]; dup {
			return nil, at(n, "%s on %s waived again (first at %s)", e.Check, e.Subject, prev)
		}
		seen[k] = e.Where
		f.Entries = append(f.Entries, e)
	}
	return f, nil
}

// noAliases refuses anchors and aliases: a waiver file has no use for them,
// and they are how a small file expands into a large one.
func noAliases(n *yaml.Node, at func(*yaml.Node, string, ...any) error) error {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return at(n, "YAML anchors and aliases are not accepted in a waiver file")
	}
	for _, c := range n.Content {
		if err := noAliases(c, at); err != nil {
			return err
		}
	}
	return nil
}

// entry reads one list item, strictly: known keys once each, scalars only.
func entry(n *yaml.Node, at func(*yaml.Node, string, ...any) error) (Entry, error) {
	var e Entry
	if n.Kind != yaml.MappingNode {
		return e, at(n, "a waiver is a mapping of check, subject, reason and expires")
	}
	got := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		known := false
		for _, want := range keys {
			known = known || k.Value == want
		}
		if !known {
			return e, at(k, "unknown key %q (want %s)", k.Value, strings.Join(keys, ", "))
		}
		if got[k.Value] != nil {
			return e, at(k, "%s given twice", k.Value)
		}
		if v.Kind != yaml.ScalarNode {
			return e, at(v, "%s: want a single value", k.Value)
		}
		got[k.Value] = v
	}
	val := func(k string) string {
		if v := got[k]; v != nil && v.Tag != "!!null" {
			return strings.TrimSpace(v.Value)
		}
		return ""
	}
	e.Check, e.Subject, e.Host = val("check"), val("subject"), val("host")
	e.Reason = strings.Join(strings.Fields(val("reason")), " ")
	switch {
	case e.Check == "":
		return e, at(n, "check is required (a check ID, see 'dbhost checks')")
	case e.Subject == "":
		return e, at(n, "%s: subject is required (as the audit names it: host, postgres:5432, device:vda; or * for every subject)", e.Check)
	case e.Reason == "":
		return e, at(n, "%s on %s: reason is required (why the finding is accepted)", e.Check, e.Subject)
	}
	if err := checkID(e.Check); err != nil {
		return e, at(got["check"], "%v", err)
	}
	if err := plain("subject", e.Subject, maxSubject); err != nil {
		return e, at(got["subject"], "%v", err)
	}
	if err := plain("host", e.Host, maxHost); err != nil {
		return e, at(got["host"], "%v", err)
	}
	if utf8.RuneCountInString(e.Reason) > maxReason {
		return e, at(got["reason"], "reason is longer than %d characters", maxReason)
	}
	if strings.IndexFunc(e.Reason, unicode.IsControl) >= 0 {
		return e, at(got["reason"], "reason holds a control character")
	}
	if s := val("expires"); s != "" {
		t, err := ParseExpiry(s)
		if err != nil {
			return e, at(got["expires"], "%v", err)
		}
		e.Expires = t
	}
	return e, nil
}

// checkID accepts one check of the catalog, exactly. A domain prefix is
// refused: it would also waive every check added to that domain later.
func checkID(id string) error {
	if _, ok := check.Lookup(id); ok {
		return nil
	}
	p := strings.TrimSuffix(id, ".*")
	n := 0
	for _, c := range check.All() {
		if strings.HasPrefix(c.ID, p+".") {
			n++
		}
	}
	if n > 0 {
		return fmt.Errorf("check %q names a domain of %d checks: a waiver names one check ID (see 'dbhost checks %s')", id, n, p)
	}
	return fmt.Errorf("unknown check %q (see 'dbhost checks')", id)
}

// plain refuses values with spaces or control characters, and long ones.
func plain(what, s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%s is longer than %d bytes", what, max)
	}
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return fmt.Errorf("%s %q holds a space or control character", what, s)
	}
	return nil
}

// ParseExpiry reads an expiry: a date (YYYY-MM-DD, valid to the end of
// that day, UTC) or an RFC 3339 time.
func ParseExpiry(s string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t.Add(24*time.Hour - time.Second), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	return time.Time{}, fmt.Errorf("expires %q: want a date (2026-12-31) or an RFC 3339 time (2026-12-31T18:00:00Z)", s)
}

// Expired reports whether the entry no longer applies at now.
func (e Entry) Expired(now time.Time) bool { return !e.Expires.IsZero() && now.After(e.Expires) }

// ForHost reports whether the entry applies on the host named hostname: an
// entry without host applies everywhere (host names compare without case).
func (e Entry) ForHost(hostname string) bool {
	return e.Host == "" || strings.EqualFold(e.Host, strings.TrimSpace(hostname))
}

// matches reports whether the entry names the finding's check and subject.
func (e Entry) matches(fd check.Finding) bool {
	return fd.ID == e.Check && (e.Subject == "*" || e.Subject == fd.Subject)
}
