package textio

import (
	"regexp"
	"sync"
)

// Regexp is a regular expression compiled on its first use. A package-level
// regexp.MustCompile runs at start-up for every command, although most
// commands never match the pattern; this one costs nothing until it does.
// Its methods are those of regexp.Regexp that dbhost uses.
type Regexp struct {
	expr string
	once sync.Once
	re   *regexp.Regexp
}

// LazyRegexp returns expr, to be compiled on first use. Like
// regexp.MustCompile it panics if expr does not compile (then, not here):
// the package's tests reach every pattern.
func LazyRegexp(expr string) *Regexp { return &Regexp{expr: expr} }

// Regexp returns the compiled expression. (A sync.Once here, not
// sync.OnceValue: that would put closures of its own at every one of
// the many call sites, in the binary.)
func (r *Regexp) Regexp() *regexp.Regexp {
	r.once.Do(func() { r.re = regexp.MustCompile(r.expr) })
	return r.re
}

func (r *Regexp) String() string                 { return r.Regexp().String() }
func (r *Regexp) Match(b []byte) bool            { return r.Regexp().Match(b) }
func (r *Regexp) MatchString(s string) bool      { return r.Regexp().MatchString(s) }
func (r *Regexp) FindString(s string) string     { return r.Regexp().FindString(s) }
func (r *Regexp) FindSubmatch(b []byte) [][]byte { return r.Regexp().FindSubmatch(b) }
func (r *Regexp) FindStringSubmatch(s string) []string {
	return r.Regexp().FindStringSubmatch(s)
}
func (r *Regexp) FindAllString(s string, n int) []string { return r.Regexp().FindAllString(s, n) }
func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.Regexp().FindAllStringSubmatch(s, n)
}
func (r *Regexp) ReplaceAllString(src, repl string) string {
	return r.Regexp().ReplaceAllString(src, repl)
}
func (r *Regexp) ReplaceAllStringFunc(src string, repl func(string) string) string {
	return r.Regexp().ReplaceAllStringFunc(src, repl)
}
func (r *Regexp) Split(s string, n int) []string { return r.Regexp().Split(s, n) }
