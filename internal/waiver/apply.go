package waiver

import (
	"fmt"
	"time"

	"github.com/dbhost/dbhost/internal/check"
)

// Outcome is what a waiver file did to one audit.
type Outcome struct {
	// Source is the file the waivers came from.
	Source string `json:"source"`
	// Waived counts the failing findings accepted.
	Waived int `json:"waived"`
	// Expired are the entries for this host past their expiry: what they
	// named counts as failing again.
	Expired []Entry `json:"expired,omitempty"`
	// Stale are the entries for this host that name no finding of the
	// audit (a subject that is gone, or mistyped).
	Stale []Entry `json:"stale,omitempty"`
	// Unneeded are the entries whose findings all pass.
	Unneeded []Entry `json:"unneeded,omitempty"`
}

// Apply marks the failing findings the file's entries for this host
// accept (check.Finding.Waiver), as of now, and says which entries expired,
// name nothing or are no longer needed. Entries of checks sel leaves out
// are not looked at. A finding two entries accept takes the first. A nil
// file waives nothing and returns nil.
func (f *File) Apply(fds []check.Finding, sel check.Selector, hostname string, now time.Time) *Outcome {
	if f == nil {
		return nil
	}
	o := &Outcome{Source: f.Name}
	for _, e := range f.Entries {
		if !e.ForHost(hostname) || !sel.Match(e.Check) {
			continue
		}
		if e.Expired(now) {
			o.Expired = append(o.Expired, e)
			continue
		}
		matched, failing, unknown := false, false, false
		for i := range fds {
			fd := &fds[i]
			if !e.matches(*fd) {
				continue
			}
			matched = true
			switch fd.Status {
			case check.Fail:
				failing = true
				if fd.Waiver == nil {
					fd.Waiver = &check.Waiver{Reason: e.Reason, Expires: e.Expires, Source: e.Where}
					o.Waived++
				}
			case check.Unknown:
				unknown = true
			}
		}
		switch {
		case !matched:
			o.Stale = append(o.Stale, e)
		case !failing && !unknown:
			o.Unneeded = append(o.Unneeded, e)
		}
	}
	return o
}

// Notes says, one line each, which waivers expired, name nothing or are no
// longer needed.
func (o *Outcome) Notes() []string {
	if o == nil {
		return nil
	}
	var out []string
	for _, e := range o.Expired {
		out = append(out, fmt.Sprintf("waiver of %s on %s (%s) expired %s: its finding counts again (it was: %s)",
			e.Check, e.Subject, e.Where, When(e.Expires), e.Reason))
	}
	for _, e := range o.Stale {
		out = append(out, fmt.Sprintf("waiver of %s on %s (%s) matches no finding of this audit: a stale waiver (remove it, or correct its subject)",
			e.Check, e.Subject, e.Where))
	}
	for _, e := range o.Unneeded {
		out = append(out, fmt.Sprintf("waiver of %s on %s (%s) is not needed: the finding passes", e.Check, e.Subject, e.Where))
	}
	return out
}

// When shows an expiry: the date alone for the end of a day (as a date in
// the file gives it), else the time in UTC.
func When(t time.Time) string {
	t = t.UTC()
	if t.Hour() == 23 && t.Minute() == 59 && t.Second() == 59 {
		return t.Format(time.DateOnly)
	}
	return t.Format("2006-01-02 15:04:05Z")
}
