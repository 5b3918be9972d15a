package cli

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/termsafe"
	"github.com/dbhost/dbhost/internal/waiver"
)

// waiverFlags are --waivers FILE and --no-waivers, and the waiver file
// they choose once read (docs/waivers.md).
type waiverFlags struct {
	file       string
	none       bool
	registered bool
	loaded     *waiver.File
}

func (w *waiverFlags) register(fs *pflag.FlagSet) {
	w.registered = true
	fs.StringVar(&w.file, "waivers", "", "the accepted findings (docs/waivers.md); default: "+waiver.DefaultPath+" of the host or snapshot, when root owns it and nobody else can write it")
	fs.BoolVar(&w.none, "no-waivers", false, "apply no waiver file: every failing finding counts")
}

// read loads the waiver file for the host h is (live, or a snapshot that
// recorded the host's file), unless the command takes no waivers.
func (w *waiverFlags) read(h *host.Host) error {
	w.loaded = nil
	if !w.registered {
		return nil
	}
	f, err := w.choose(func() (*waiver.File, error) { return waiver.ReadHost(h, waiver.DefaultPath) })
	w.loaded = f
	return err
}

// choose reads the file the flags name, --no-waivers none, else the host's
// default file through readDefault.
func (w *waiverFlags) choose(readDefault func() (*waiver.File, error)) (*waiver.File, error) {
	switch {
	case w.none && w.file != "":
		return nil, errors.New("--waivers and --no-waivers contradict each other")
	case w.none:
		return nil, nil
	case w.file != "":
		f, err := waiver.Read(w.file)
		if err != nil {
			return nil, fmt.Errorf("--waivers: %w", err)
		}
		return f, nil
	}
	return readDefault()
}

// apply marks the findings the loaded file waives; nil when no file.
func (w *waiverFlags) apply(fds []check.Finding, sel check.Selector, f *facts.Facts) *waiver.Outcome {
	return w.loaded.Apply(fds, sel, f.System.Hostname, observedAt(f))
}

// observedAt is when the facts were observed: a waiver's expiry is judged
// then, so that a snapshot audits the same today as next month.
func observedAt(f *facts.Facts) time.Time {
	if t := f.Manifest.CollectedAt; !t.IsZero() {
		return t
	}
	return time.Now()
}

// waivedNotes says, for `fix`, which failing findings with a fix were left
// alone because they are waived, and what the waiver file's outcome was.
func waivedNotes(fds []check.Finding, o *waiver.Outcome) []string {
	var out []string
	for _, fd := range fds {
		if fd.Waiver == nil || fd.Status != check.Fail || fd.Fix == nil {
			continue
		}
		out = append(out, fmt.Sprintf("%s (%s) is waived, not fixed: %s (%s)", fd.ID, fd.Subject, fd.Waiver.Reason, waiverWhen(fd.Waiver)))
	}
	return append(out, o.Notes()...)
}

// waiverWhen says until when and where a waiver was written.
func waiverWhen(w *check.Waiver) string {
	if w.Expires.IsZero() {
		return "no expiry, " + w.Source
	}
	return "until " + waiver.When(w.Expires) + ", " + w.Source
}

// printWaiverNotes writes the waiver file's notes, one a line.
func printWaiverNotes(w io.Writer, prefix string, notes []string) {
	for _, n := range notes {
		fmt.Fprintf(w, "%s%s\n", prefix, termsafe.Line(n))
	}
}
