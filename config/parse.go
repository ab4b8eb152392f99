package config

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// nodeKind is the JSON type of a parsed value.
type nodeKind uint8

const (
	nodeNull nodeKind = iota
	nodeBool
	nodeNumber
	nodeString
	nodeObject
	nodeArray
)

func (k nodeKind) String() string {
	switch k {
	case nodeNull:
		return "null"
	case nodeBool:
		return "boolean"
	case nodeNumber:
		return "number"
	case nodeString:
		return "string"
	case nodeObject:
		return "object"
	default:
		return "array"
	}
}

// node is one value of the generic tree. Objects keep their keys in file order so that errors and explain output
// follow the file, and every node remembers where it started so errors can point at it.
type node struct {
	kind  nodeKind
	b     bool
	num   string // number literal as written, so integers keep full precision
	str   string
	keys  []string // object keys in file order
	vals  []*node  // object values, parallel to keys
	kpos  []pos    // where each key starts, parallel to keys
	elems []*node  // array elements
	line  int
	col   int
}

// pos is a 1-based line and column.
type pos struct{ line, col int }

// get returns the value of an object key, or nil.
func (n *node) get(key string) *node {
	if n == nil || n.kind != nodeObject {
		return nil
	}
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

// keyPos returns where key is written, or the object's own position when it is absent.
func (n *node) keyPos(key string) pos {
	for i, k := range n.keys {
		if k == key {
			return n.kpos[i]
		}
	}
	return pos{n.line, n.col}
}

// set replaces the value of key, or appends it (at position at).
func (n *node) set(key string, v *node, at pos) {
	for i, k := range n.keys {
		if k == key {
			n.vals[i] = v
			return
		}
	}
	n.keys = append(n.keys, key)
	n.vals = append(n.vals, v)
	n.kpos = append(n.kpos, at)
}

// remove deletes key from an object.
func (n *node) remove(key string) {
	for i, k := range n.keys {
		if k == key {
			n.keys = append(n.keys[:i], n.keys[i+1:]...)
			n.vals = append(n.vals[:i], n.vals[i+1:]...)
			n.kpos = append(n.kpos[:i], n.kpos[i+1:]...)
			return
		}
	}
}

// rename changes a key in place, keeping its position in the object.
func (n *node) rename(from, to string) {
	for i, k := range n.keys {
		if k == from {
			n.keys[i] = to
			return
		}
	}
}

// isAuto reports whether the node is the Hugging Face placeholder string "auto".
func (n *node) isAuto() bool { return n != nil && n.kind == nodeString && n.str == "auto" }

// float returns a number node's value.
func (n *node) float() (float64, error) { return strconv.ParseFloat(n.num, 64) }

// compact renders the node as compact JSON (for raw blocks and messages).
func (n *node) compact() string {
	var sb strings.Builder
	n.writeCompact(&sb)
	return sb.String()
}

func (n *node) writeCompact(sb *strings.Builder) {
	switch n.kind {
	case nodeNull:
		sb.WriteString("null")
	case nodeBool:
		sb.WriteString(strconv.FormatBool(n.b))
	case nodeNumber:
		sb.WriteString(n.num)
	case nodeString:
		sb.WriteString(quoteJSON(n.str))
	case nodeObject:
		sb.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(quoteJSON(k))
			sb.WriteByte(':')
			n.vals[i].writeCompact(sb)
		}
		sb.WriteByte('}')
	case nodeArray:
		sb.WriteByte('[')
		for i, e := range n.elems {
			if i > 0 {
				sb.WriteByte(',')
			}
			e.writeCompact(sb)
		}
		sb.WriteByte(']')
	}
}

// maxDepth bounds nesting so hostile input cannot exhaust the stack; real configs nest four levels deep.
const maxDepth = 64

// parser reads DeepSpeed's relaxed JSON: standard JSON plus `//`, `#` and `/* */` comments and trailing commas,
// which is the subset of hjson that DeepSpeed configs use in practice.
type parser struct {
	file string
	src  []byte
	pos  int
	line int
	col  int
	errs []*Error // duplicate keys; parsing continues past them
}

// parseTree parses src into a tree. A syntax error stops parsing and is returned alone; duplicate keys are
// collected and returned together once the whole file has been read.
func parseTree(file string, src []byte) (*node, Errors) {
	p := &parser{file: file, src: src, line: 1, col: 1}
	if len(src) >= 3 && src[0] == 0xEF && src[1] == 0xBB && src[2] == 0xBF {
		p.pos = 3 // a UTF-8 byte-order mark is common in files saved by Windows editors
	}
	if err := p.skipSpace(); err != nil {
		return nil, Errors{err}
	}
	if p.pos >= len(p.src) {
		return nil, Errors{p.errAt(p.line, p.col, "the file is empty", "write a JSON object such as {\"train_micro_batch_size_per_gpu\": 1}")}
	}
	root, err := p.value(0)
	if err != nil {
		return nil, Errors{err}
	}
	if err := p.skipSpace(); err != nil {
		return nil, Errors{err}
	}
	if p.pos < len(p.src) {
		return nil, Errors{p.errHere(fmt.Sprintf("unexpected %s after the end of the top-level value", p.describe()),
			"remove the trailing text, or merge it into the top-level object")}
	}
	if root.kind != nodeObject {
		return nil, Errors{p.errAt(root.line, root.col, fmt.Sprintf("the top level is a %s; a DeepSpeed config is a JSON object", root.kind),
			"wrap the settings in { ... }")}
	}
	if len(p.errs) > 0 {
		return root, p.errs
	}
	return root, nil
}

func (p *parser) errAt(line, col int, msg, fix string) *Error {
	return &Error{File: p.file, Line: line, Col: col, Msg: msg, Fix: fix}
}

func (p *parser) errHere(msg, fix string) *Error { return p.errAt(p.line, p.col, msg, fix) }

// describe names the byte at the cursor for error messages.
func (p *parser) describe() string {
	if p.pos >= len(p.src) {
		return "end of file"
	}
	r, _ := utf8.DecodeRune(p.src[p.pos:])
	if r == utf8.RuneError {
		return fmt.Sprintf("byte 0x%02x", p.src[p.pos])
	}
	return strconv.QuoteRune(r)
}

// advance moves the cursor over n bytes, tracking line and column (columns count runes).
func (p *parser) advance(n int) {
	for i := 0; i < n && p.pos < len(p.src); i++ {
		c := p.src[p.pos]
		p.pos++
		if c == '\n' {
			p.line++
			p.col = 1
		} else if c&0xC0 != 0x80 {
			p.col++
		}
	}
}

// skipSpace skips whitespace and comments.
func (p *parser) skipSpace() *Error {
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.advance(1)
		case c == '#' || (c == '/' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '/'):
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.advance(1)
			}
		case c == '/' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '*':
			line, col := p.line, p.col
			p.advance(2)
			for {
				if p.pos >= len(p.src) {
					return p.errAt(line, col, "unterminated /* comment", "close the comment with */")
				}
				if p.src[p.pos] == '*' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '/' {
					p.advance(2)
					break
				}
				p.advance(1)
			}
		default:
			return nil
		}
	}
	return nil
}

func (p *parser) value(depth int) (*node, *Error) {
	if depth > maxDepth {
		return nil, p.errHere(fmt.Sprintf("values are nested more than %d levels deep", maxDepth), "flatten the structure")
	}
	if p.pos >= len(p.src) {
		return nil, p.errHere("unexpected end of file where a value was expected", "complete the value and close every { and [")
	}
	line, col := p.line, p.col
	c := p.src[p.pos]
	switch {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.stringLit()
		if err != nil {
			return nil, err
		}
		return &node{kind: nodeString, str: s, line: line, col: col}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == '\'':
		return nil, p.errHere("strings must use double quotes", "replace the single quotes with double quotes")
	}
	word := p.word()
	switch word {
	case "true", "false":
		p.advance(len(word))
		return &node{kind: nodeBool, b: word == "true", line: line, col: col}, nil
	case "null":
		p.advance(len(word))
		return &node{kind: nodeNull, line: line, col: col}, nil
	case "True", "False", "None":
		return nil, p.errHere(fmt.Sprintf("%s is Python, not JSON", word), fmt.Sprintf("write %s", strings.ToLower(map[string]string{"True": "true", "False": "false", "None": "null"}[word])))
	case "NaN", "Infinity", "inf", "nan":
		return nil, p.errHere(fmt.Sprintf("%s is not a JSON number", word), "write a finite number")
	case "":
		return nil, p.errHere(fmt.Sprintf("unexpected %s where a value was expected", p.describe()), "write a value: a number, string, true, false, null, object or array")
	}
	return nil, p.errHere(fmt.Sprintf("unexpected word %q where a value was expected", word), fmt.Sprintf("if %q is meant as text, put it in double quotes", word))
}

// word returns the run of identifier characters at the cursor without consuming it.
func (p *parser) word() string {
	end := p.pos
	for end < len(p.src) {
		c := p.src[end]
		if c == '_' || c == '-' || c == '.' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') {
			end++
			continue
		}
		break
	}
	return string(p.src[p.pos:end])
}

func (p *parser) object(depth int) (*node, *Error) {
	n := &node{kind: nodeObject, line: p.line, col: p.col}
	p.advance(1) // {
	seen := map[string]bool{}
	for {
		if err := p.skipSpace(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.src) {
			return nil, p.errAt(n.line, n.col, "unterminated object: end of file before the closing }", "add the missing }")
		}
		if p.src[p.pos] == '}' {
			p.advance(1)
			return n, nil
		}
		if p.src[p.pos] == '\'' {
			return nil, p.errHere("strings must use double quotes", "replace the single quotes with double quotes")
		}
		if p.src[p.pos] != '"' {
			if w := p.word(); w != "" {
				return nil, p.errHere(fmt.Sprintf("object key %s is not quoted", w), fmt.Sprintf("write \"%s\"", w))
			}
			return nil, p.errHere(fmt.Sprintf("unexpected %s where an object key or } was expected", p.describe()), "object keys are double-quoted strings")
		}
		kline, kcol := p.line, p.col
		key, err := p.stringLit()
		if err != nil {
			return nil, err
		}
		if err := p.skipSpace(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return nil, p.errHere(fmt.Sprintf("expected : after key %q, found %s", key, p.describe()), "write \"key\": value")
		}
		p.advance(1)
		if err := p.skipSpace(); err != nil {
			return nil, err
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		if seen[key] {
			// DeepSpeed rejects duplicates (dict_raise_error_on_duplicate_keys); keeping the first value lets the
			// rest of the file still be checked.
			p.errs = append(p.errs, p.errAt(kline, kcol, fmt.Sprintf("duplicate key %q", key),
				"keep one of the entries; DeepSpeed refuses configs with duplicate keys"))
		} else {
			seen[key] = true
			n.keys = append(n.keys, key)
			n.vals = append(n.vals, v)
			n.kpos = append(n.kpos, pos{kline, kcol})
		}
		if err := p.skipSpace(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.src) {
			return nil, p.errAt(n.line, n.col, "unterminated object: end of file before the closing }", "add the missing }")
		}
		switch p.src[p.pos] {
		case ',':
			p.advance(1) // a trailing comma before } is accepted by the loop head
		case '}':
			p.advance(1)
			return n, nil
		default:
			return nil, p.errHere(fmt.Sprintf("expected , or } after the value of %q, found %s", key, p.describe()), "separate entries with commas")
		}
	}
}

func (p *parser) array(depth int) (*node, *Error) {
	n := &node{kind: nodeArray, line: p.line, col: p.col}
	p.advance(1) // [
	for {
		if err := p.skipSpace(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.src) {
			return nil, p.errAt(n.line, n.col, "unterminated array: end of file before the closing ]", "add the missing ]")
		}
		if p.src[p.pos] == ']' {
			p.advance(1)
			return n, nil
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.elems = append(n.elems, v)
		if err := p.skipSpace(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.src) {
			return nil, p.errAt(n.line, n.col, "unterminated array: end of file before the closing ]", "add the missing ]")
		}
		switch p.src[p.pos] {
		case ',':
			p.advance(1)
		case ']':
			p.advance(1)
			return n, nil
		default:
			return nil, p.errHere(fmt.Sprintf("expected , or ] in array, found %s", p.describe()), "separate elements with commas")
		}
	}
}

// number scans a JSON number literal.
func (p *parser) number() (*node, *Error) {
	line, col := p.line, p.col
	start := p.pos
	i := p.pos
	digits := func() int {
		s := i
		for i < len(p.src) && p.src[i] >= '0' && p.src[i] <= '9' {
			i++
		}
		return i - s
	}
	if i < len(p.src) && p.src[i] == '-' {
		i++
	}
	intStart := i
	if digits() == 0 {
		p.advance(i - start)
		return nil, p.errHere("a number needs digits after the minus sign", "write a number such as -1")
	}
	if p.src[intStart] == '0' && i-intStart > 1 {
		p.advance(intStart - start)
		return nil, p.errHere("numbers must not have leading zeros", "remove the leading zeros")
	}
	if i < len(p.src) && p.src[i] == '.' {
		i++
		if digits() == 0 {
			p.advance(i - start)
			return nil, p.errHere("a number needs digits after the decimal point", "write e.g. 1.0 instead of 1.")
		}
	}
	if i < len(p.src) && (p.src[i] == 'e' || p.src[i] == 'E') {
		i++
		if i < len(p.src) && (p.src[i] == '+' || p.src[i] == '-') {
			i++
		}
		if digits() == 0 {
			p.advance(i - start)
			return nil, p.errHere("a number needs digits in its exponent", "write e.g. 5e8")
		}
	}
	lit := string(p.src[start:i])
	p.advance(i - start)
	if _, err := strconv.ParseFloat(lit, 64); err != nil {
		return nil, p.errAt(line, col, fmt.Sprintf("number %s is out of range", lit), "write a smaller number")
	}
	return &node{kind: nodeNumber, num: lit, line: line, col: col}, nil
}

// stringLit scans a double-quoted JSON string with escapes.
func (p *parser) stringLit() (string, *Error) {
	line, col := p.line, p.col
	p.advance(1) // opening quote
	var sb strings.Builder
	for {
		if p.pos >= len(p.src) {
			return "", p.errAt(line, col, "unterminated string", "close the string with \"")
		}
		c := p.src[p.pos]
		switch {
		case c == '"':
			p.advance(1)
			return sb.String(), nil
		case c == '\n':
			return "", p.errAt(line, col, "unterminated string: a line break inside a string", "close the string with \" before the end of the line")
		case c < 0x20:
			return "", p.errHere(fmt.Sprintf("control character 0x%02x inside a string", c), "escape it, e.g. \\t")
		case c == '\\':
			if p.pos+1 >= len(p.src) {
				return "", p.errAt(line, col, "unterminated string", "close the string with \"")
			}
			e := p.src[p.pos+1]
			simple := map[byte]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}
			if r, ok := simple[e]; ok {
				sb.WriteByte(r)
				p.advance(2)
				continue
			}
			if e != 'u' {
				return "", p.errHere(fmt.Sprintf("invalid escape \\%c in string", e), "use one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX")
			}
			r, ok := p.hex4(p.pos + 2)
			if !ok {
				return "", p.errHere("invalid \\u escape: four hex digits expected", "write \\u followed by four hex digits")
			}
			p.advance(6)
			if r >= 0xD800 && r < 0xDC00 {
				// A high surrogate must be followed by an escaped low surrogate to form one code point.
				if p.pos+1 < len(p.src) && p.src[p.pos] == '\\' && p.src[p.pos+1] == 'u' {
					if lo, ok := p.hex4(p.pos + 2); ok && lo >= 0xDC00 && lo < 0xE000 {
						p.advance(6)
						r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					} else {
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			} else if r >= 0xDC00 && r < 0xE000 {
				r = utf8.RuneError
			}
			sb.WriteRune(r)
		default:
			sb.WriteByte(c)
			p.advance(1)
		}
	}
}

func (p *parser) hex4(at int) (rune, bool) {
	if at+4 > len(p.src) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(p.src[at:at+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(v), true
}

// quoteJSON quotes s as a JSON string. strconv.Quote writes Go's escapes
// (\x00, \a, \v, \U0001F600), which JSON does not have: a key or value read
// from a hostile or odd file must come back out as JSON that parses.
func quoteJSON(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f || r == 0x2028 || r == 0x2029:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r) // invalid UTF-8 arrives as U+FFFD
		}
	}
	b.WriteByte('"')
	return b.String()
}
