package sasl

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// LoginModule is one entry of a JAAS login section: the module's class, its control flag and its
// options, in the file's order of appearance (a repeated option keeps its last value).
type LoginModule struct {
	Class   string
	Flag    string // required, requisite, sufficient or optional (lower case)
	Options map[string]string
}

// JAAS is a parsed JAAS login configuration: sections by name, each a list of login modules.
type JAAS map[string][]LoginModule

// ReadJAAS reads and parses the JAAS configuration file at path.
func ReadJAAS(path string) (JAAS, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sasl: jaas: %w", err)
	}
	j, err := ParseJAAS(string(b))
	if err != nil {
		return nil, fmt.Errorf("sasl: jaas %s: %w", path, err)
	}
	return j, nil
}

// ParseJAAS parses a JAAS login configuration in the syntax Java's default ConfigFile reads:
//
//	Section {
//	    com.example.LoginModule required key="value" key2=value2;
//	    ...
//	};
//
// Comments are /* ... */, // to the end of the line and # to the end of the line. Values are
// double-quoted strings (with backslash escapes) or bare words. A section named twice is an
// error, as is an unknown control flag or anything left unterminated.
func ParseJAAS(text string) (JAAS, error) {
	lx := &jaasLexer{s: text, line: 1}
	out := JAAS{}
	for {
		tok, err := lx.next()
		if err != nil {
			return nil, err
		}
		if tok.kind == tokEOF {
			return out, nil
		}
		if tok.kind != tokWord {
			return nil, lx.errorf("expected a section name, found %s", tok)
		}
		name := tok.text
		if _, dup := out[name]; dup {
			return nil, lx.errorf("section %q appears twice", name)
		}
		if err := lx.expect('{'); err != nil {
			return nil, err
		}
		var mods []LoginModule
		for {
			tok, err := lx.next()
			if err != nil {
				return nil, err
			}
			if tok.kind == tokPunct && tok.text == "}" {
				break
			}
			if tok.kind != tokWord {
				return nil, lx.errorf("section %q: expected a login module class, found %s", name, tok)
			}
			m := LoginModule{Class: tok.text, Options: map[string]string{}}
			flag, err := lx.next()
			if err != nil {
				return nil, err
			}
			m.Flag = strings.ToLower(flag.text)
			if flag.kind != tokWord || !validFlag(m.Flag) {
				return nil, lx.errorf("section %q: %s: expected required, requisite, sufficient or optional, found %s", name, m.Class, flag)
			}
			for {
				tok, err := lx.next()
				if err != nil {
					return nil, err
				}
				if tok.kind == tokPunct && tok.text == ";" {
					break
				}
				if tok.kind != tokWord {
					return nil, lx.errorf("section %q: %s: expected an option name or ';', found %s", name, m.Class, tok)
				}
				key := tok.text
				if err := lx.expect('='); err != nil {
					return nil, err
				}
				val, err := lx.next()
				if err != nil {
					return nil, err
				}
				if val.kind != tokWord && val.kind != tokString {
					return nil, lx.errorf("section %q: option %s: expected a value, found %s", name, key, val)
				}
				m.Options[key] = val.text
			}
			mods = append(mods, m)
		}
		if len(mods) == 0 {
			return nil, lx.errorf("section %q has no login module", name)
		}
		if err := lx.expect(';'); err != nil {
			return nil, err
		}
		out[name] = mods
	}
}

func validFlag(f string) bool {
	switch f {
	case "required", "requisite", "sufficient", "optional":
		return true
	}
	return false
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokWord
	tokString
	tokPunct
)

type token struct {
	kind tokKind
	text string
}

func (t token) String() string {
	switch t.kind {
	case tokEOF:
		return "the end of the file"
	case tokString:
		return "a quoted string"
	}
	return fmt.Sprintf("%q", t.text)
}

type jaasLexer struct {
	s    string
	i    int
	line int
}

func (lx *jaasLexer) errorf(format string, args ...any) error {
	return fmt.Errorf("line %d: %s", lx.line, fmt.Sprintf(format, args...))
}

func (lx *jaasLexer) expect(p byte) error {
	tok, err := lx.next()
	if err != nil {
		return err
	}
	if tok.kind != tokPunct || tok.text != string(p) {
		return lx.errorf("expected %q, found %s", string(p), tok)
	}
	return nil
}

// skip passes blanks and comments.
func (lx *jaasLexer) skip() error {
	for lx.i < len(lx.s) {
		c := lx.s[lx.i]
		switch {
		case c == '\n':
			lx.line++
			lx.i++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			lx.i++
		case c == '#' || strings.HasPrefix(lx.s[lx.i:], "//"):
			for lx.i < len(lx.s) && lx.s[lx.i] != '\n' {
				lx.i++
			}
		case strings.HasPrefix(lx.s[lx.i:], "/*"):
			end := strings.Index(lx.s[lx.i+2:], "*/")
			if end < 0 {
				return lx.errorf("unterminated /* comment")
			}
			lx.line += strings.Count(lx.s[lx.i:lx.i+2+end], "\n")
			lx.i += end + 4
		default:
			return nil
		}
	}
	return nil
}

func (lx *jaasLexer) next() (token, error) {
	if err := lx.skip(); err != nil {
		return token{}, err
	}
	if lx.i >= len(lx.s) {
		return token{kind: tokEOF}, nil
	}
	c := lx.s[lx.i]
	switch c {
	case '{', '}', ';', '=':
		lx.i++
		return token{kind: tokPunct, text: string(c)}, nil
	case '"':
		var b strings.Builder
		for j := lx.i + 1; j < len(lx.s); j++ {
			switch d := lx.s[j]; d {
			case '"':
				lx.i = j + 1
				return token{kind: tokString, text: b.String()}, nil
			case '\\':
				if j+1 >= len(lx.s) {
					return token{}, lx.errorf("unterminated quoted string")
				}
				j++
				switch e := lx.s[j]; e {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				default:
					b.WriteByte(e)
				}
			case '\n':
				return token{}, lx.errorf("newline inside a quoted string")
			default:
				b.WriteByte(d)
			}
		}
		return token{}, lx.errorf("unterminated quoted string")
	}
	j := lx.i
	for j < len(lx.s) && !strings.ContainsRune(" \t\r\n\f{};=\"", rune(lx.s[j])) &&
		!strings.HasPrefix(lx.s[j:], "/*") && !strings.HasPrefix(lx.s[j:], "//") {
		j++
	}
	if j == lx.i {
		return token{}, lx.errorf("unexpected character %q", c)
	}
	w := lx.s[lx.i:j]
	lx.i = j
	return token{kind: tokWord, text: w}, nil
}

// errNoSection is returned when the configured login section is missing.
var errNoSection = errors.New("sasl: no such JAAS section")
