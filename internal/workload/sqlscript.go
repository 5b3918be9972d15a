package workload

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
)

// Script is a parsed SQL workload script; see ParseScript for the format.
type Script struct {
	Params []Param
	// Setup statements run once, in order, by Prepare.
	Setup []string
	// Reader and Writer are the statements of one reader or writer
	// transaction (one pass), with the engine's placeholders in place of
	// the :name parameters.
	Reader, Writer []Statement
}

// Param is a random integer parameter, drawn uniformly from [Low, High]
// once per pass, so every statement of a pass sees the same value.
type Param struct {
	Name      string
	Low, High int64
}

// Statement is one statement of a pass and the parameters its
// placeholders take, in order.
type Statement struct {
	SQL  string
	Args []string
}

// ParseScript parses a workload script for engine e (which decides the
// placeholder style and the quoting rules). The format is plain SQL with
// directives in comment lines of their own:
//
//	-- param id 1 100000
//	-- setup
//	DROP TABLE IF EXISTS kv;
//	CREATE TABLE kv (id int PRIMARY KEY, v int NOT NULL);
//	INSERT INTO kv SELECT g, 0 FROM generate_series(1, 100000) g;
//	-- reader
//	SELECT v FROM kv WHERE id = :id;
//	-- writer
//	BEGIN;
//	UPDATE kv SET v = v + 1 WHERE id = :id;
//	COMMIT;
//
// "-- param NAME LOW HIGH" declares :NAME, a uniform random integer in
// [LOW, HIGH] drawn once per pass, so every statement of a pass sees the
// same value. "-- setup", "-- reader" and "-- writer" (alone on their line)
// start a section: setup runs once, in order, by Prepare; a reader or
// writer pass is its section's statements in order, run in a loop by each
// worker of that group (put BEGIN/COMMIT in it to make it one
// transaction). Statements end with ";" (optional at the end of a
// section); semicolons inside quotes, comments and PostgreSQL dollar-quoted
// bodies do not count. :NAME must be declared ("::" casts and ":=" are left
// alone); parameters are bound, never spliced into the text, and setup
// takes none. Other comments ("--", "/* */", MySQL "#") are ignored.
func ParseScript(src string, e engine.Engine) (*Script, error) {
	p := &scriptParser{s: &Script{}, e: e, params: map[string]Param{}, line: 1}
	if err := p.parse(src); err != nil {
		return nil, fmt.Errorf("script line %d: %w", p.errLine, err)
	}
	if len(p.s.Setup)+len(p.s.Reader)+len(p.s.Writer) == 0 {
		return nil, fmt.Errorf("script has no statements (sections: -- setup, -- reader, -- writer)")
	}
	return p.s, nil
}

type scriptParser struct {
	s       *Script
	e       engine.Engine
	params  map[string]Param
	section string
	line    int // current line
	errLine int
	start   int // line where the current statement began
}

func (p *scriptParser) parse(src string) error {
	var cur strings.Builder
	blank := true // cur holds only white space
	flush := func() error {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		blank = true
		if text == "" {
			return nil
		}
		p.errLine = p.start
		return p.add(text)
	}
	write := func(s string) {
		if blank && strings.TrimSpace(s) != "" {
			blank = false
			p.start = p.line
		}
		cur.WriteString(s)
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			cur.WriteByte(c)
			p.line++
			i++
		case c == '-' && strings.HasPrefix(src[i:], "--"), c == '#' && p.e == engine.MySQL:
			end := strings.IndexByte(src[i:], '\n')
			if end < 0 {
				end = len(src) - i
			}
			if lineStart(src, i) {
				// Directives act; other comments are dropped like any. A
				// section ends the statement before it.
				if sectionWord(src[i:i+end]) != "" {
					if err := flush(); err != nil {
						return err
					}
				}
				if err := p.directive(src[i : i+end]); err != nil {
					p.errLine = p.line
					return err
				}
			}
			i += end
		case c == ';':
			i++
			if err := flush(); err != nil {
				return err
			}
		case c == '\'' || c == '"' || c == '`':
			n, err := p.quoted(src[i:], c)
			if err != nil {
				p.errLine = p.line
				return err
			}
			write(src[i : i+n])
			p.line += strings.Count(src[i:i+n], "\n")
			i += n
		case c == '/' && strings.HasPrefix(src[i:], "/*"):
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				p.errLine = p.line
				return fmt.Errorf("unterminated /* comment")
			}
			p.line += strings.Count(src[i:i+end+4], "\n")
			i += end + 4
			cur.WriteByte(' ')
		case c == '$' && p.e == engine.Postgres && dollarTag(src[i:]) != "":
			tag := dollarTag(src[i:])
			end := strings.Index(src[i+len(tag):], tag)
			if end < 0 {
				p.errLine = p.line
				return fmt.Errorf("unterminated %s quote", tag)
			}
			n := len(tag) + end + len(tag)
			write(src[i : i+n])
			p.line += strings.Count(src[i:i+n], "\n")
			i += n
		default:
			write(src[i : i+1])
			i++
		}
	}
	return flush()
}

// lineStart reports whether position i is preceded on its line only by
// blanks.
func lineStart(src string, i int) bool {
	for j := i - 1; j >= 0 && src[j] != '\n'; j-- {
		if src[j] != ' ' && src[j] != '\t' && src[j] != '\r' {
			return false
		}
	}
	return true
}

// sectionWord returns the section a comment line starts, or "".
func sectionWord(comment string) string {
	f := strings.Fields(strings.TrimLeft(comment, "-# \t"))
	if len(f) == 1 {
		switch w := strings.ToLower(f[0]); w {
		case "setup", "reader", "writer":
			return w
		}
	}
	return ""
}

// directive handles a whole-line comment that is a section marker or a
// parameter; other comments are not directives.
func (p *scriptParser) directive(comment string) error {
	if w := sectionWord(comment); w != "" {
		p.section = w
		return nil
	}
	f := strings.Fields(strings.TrimLeft(comment, "-# \t"))
	if len(f) == 0 {
		return nil
	}
	switch word := strings.ToLower(f[0]); {
	case word == "param":
		if len(f) != 4 {
			return fmt.Errorf("param wants: -- param NAME LOW HIGH")
		}
		if !isIdent(f[1]) {
			return fmt.Errorf("param name %q: letters, digits and _", f[1])
		}
		lo, err1 := strconv.ParseInt(f[2], 10, 64)
		hi, err2 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil || lo > hi {
			return fmt.Errorf("param %s: range %q..%q is not LOW <= HIGH integers", f[1], f[2], f[3])
		}
		if _, dup := p.params[f[1]]; dup {
			return fmt.Errorf("param %s declared twice", f[1])
		}
		prm := Param{Name: f[1], Low: lo, High: hi}
		p.params[f[1]] = prm
		p.s.Params = append(p.s.Params, prm)
		return nil
	}
	return nil
}

// quoted returns the length of the quoted string or identifier at the
// start of s (a doubled quote is part of it; MySQL also escapes with \).
func (p *scriptParser) quoted(s string, q byte) (int, error) {
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '\\' && p.e == engine.MySQL && q != '`':
			i++
		case s[i] == q:
			if i+1 < len(s) && s[i+1] == q {
				i++
				continue
			}
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated %c quote", q)
}

// dollarTag returns the $tag$ opening a dollar-quoted string at the start
// of s, or "" ($1 and the like are parameters, not quotes).
func dollarTag(s string) string {
	for i := 1; i < len(s); i++ {
		c := s[i]
		if c == '$' {
			return s[:i+1]
		}
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 1 && c >= '0' && c <= '9') {
			return ""
		}
	}
	return ""
}

func isIdent(s string) bool {
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// add files a statement under the current section, binding parameters.
func (p *scriptParser) add(text string) error {
	switch p.section {
	case "":
		return fmt.Errorf("statement before any section (-- setup, -- reader, -- writer)")
	case "setup":
		st, err := p.bind(text)
		if err != nil {
			return err
		}
		if len(st.Args) > 0 {
			return fmt.Errorf("setup statements take no parameters (:%s)", st.Args[0])
		}
		p.s.Setup = append(p.s.Setup, st.SQL)
	case "reader", "writer":
		st, err := p.bind(text)
		if err != nil {
			return err
		}
		if p.section == "reader" {
			p.s.Reader = append(p.s.Reader, st)
		} else {
			p.s.Writer = append(p.s.Writer, st)
		}
	}
	return nil
}

// bind replaces :name outside quotes with the engine's placeholder.
func (p *scriptParser) bind(text string) (Statement, error) {
	var b strings.Builder
	var args []string
	pgIndex := map[string]int{}
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			n, err := p.quoted(text[i:], c)
			if err != nil {
				return Statement{}, err
			}
			b.WriteString(text[i : i+n])
			i += n
		case c == '$' && p.e == engine.Postgres && dollarTag(text[i:]) != "":
			tag := dollarTag(text[i:])
			end := strings.Index(text[i+len(tag):], tag)
			if end < 0 {
				return Statement{}, fmt.Errorf("unterminated %s quote", tag)
			}
			n := len(tag) + end + len(tag)
			b.WriteString(text[i : i+n])
			i += n
		case c == ':' && i+1 < len(text) && text[i+1] == ':':
			b.WriteString("::") // a cast
			i += 2
		case c == ':' && i+1 < len(text) && (text[i+1] == '_' || isLetter(text[i+1])):
			j := i + 1
			for j < len(text) && (text[j] == '_' || isLetter(text[j]) || text[j] >= '0' && text[j] <= '9') {
				j++
			}
			name := text[i+1 : j]
			if _, ok := p.params[name]; !ok {
				return Statement{}, fmt.Errorf("parameter :%s is not declared (-- param %s LOW HIGH)", name, name)
			}
			if p.e == engine.Postgres {
				n, seen := pgIndex[name]
				if !seen {
					args = append(args, name)
					n = len(args)
					pgIndex[name] = n
				}
				b.WriteString("$" + strconv.Itoa(n))
			} else {
				args = append(args, name)
				b.WriteByte('?')
			}
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return Statement{SQL: b.String(), Args: args}, nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
