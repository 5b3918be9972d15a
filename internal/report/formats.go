package report

import (
	"fmt"
	"io"
	"slices"

	"github.com/dbhost/dbhost/internal/textio"
)

// Formats is one command's set of --format values, each rendering a T. Every
// command looks its flag up here, so all refuse an unknown format alike.
// The zero value is an empty set.
type Formats[T any] struct {
	names  []string // listed in UnknownFormat, in the order added
	render map[string]func(io.Writer, T) error
}

// Add makes name (and its aliases, accepted but not listed) render with
// render. It returns f so that a set can be built in one expression; adding
// a name twice is a programming error and panics.
func (f *Formats[T]) Add(name string, render func(io.Writer, T) error, aliases ...string) *Formats[T] {
	if f.render == nil {
		f.render = map[string]func(io.Writer, T) error{}
	}
	for _, n := range append([]string{name}, aliases...) {
		if _, dup := f.render[n]; dup {
			panic(fmt.Sprintf("report: format %q added twice", n))
		}
		f.render[n] = render
	}
	f.names = append(f.names, name)
	return f
}

// Names lists the formats, without aliases, in the order they were added.
func (f *Formats[T]) Names() []string { return slices.Clone(f.names) }

// Check is nil when name is a format of f (or an alias of one), else the
// UnknownFormat error. Commands call it before any slow work.
func (f *Formats[T]) Check(name string) error {
	if _, ok := f.render[name]; !ok {
		return UnknownFormat(name, f.names...)
	}
	return nil
}

// Render writes v in the named format.
func (f *Formats[T]) Render(w io.Writer, name string, v T) error {
	r, ok := f.render[name]
	if !ok {
		return UnknownFormat(name, f.names...)
	}
	return r(w, v)
}

// UnknownFormat is the one error every command gives for a --format it
// does not have: unknown format "yaml" (want text, json or markdown).
func UnknownFormat(got string, have ...string) error {
	return fmt.Errorf("unknown format %q (want %s)", got, textio.OrList(have))
}
