package config

import (
	"fmt"
	"strconv"
	"strings"
)

// The YAML that Accelerate's `accelerate config` writes and FSDP configs use: block mappings and sequences by
// indentation, plain, single- and double-quoted scalars, one-line flow collections ([a, b], {}), and comments.
// Anchors, aliases, tags and multi-line scalars never appear in those files and are refused by name, so the
// reader stays small and its input, untrusted bytes, cannot make it do more than walk the lines once.

// yamlLine is one non-blank line: its indentation and its text without the comment.
type yamlLine struct {
	indent int
	text   string
	num    int // 1-based
}

// parseYAML reads src into the same tree the JSON reader builds. The top level must be a mapping.
func parseYAML(file string, src []byte) (*node, error) {
	var lines []yamlLine
	for i, raw := range strings.Split(string(src), "\n") {
		raw = strings.TrimRight(raw, "\r")
		if i == 0 {
			raw = strings.TrimPrefix(raw, "\ufeff")
		}
		text := stripYAMLComment(raw)
		trimmed := strings.TrimSpace(text)
		if trimmed == "" || trimmed == "---" || trimmed == "..." {
			continue
		}
		indent := len(text) - len(strings.TrimLeft(text, " "))
		if strings.HasPrefix(text[indent:], "\t") {
			return nil, &Error{File: file, Line: i + 1, Col: indent + 1, Msg: "a tab indents this line", Fix: "indent YAML with spaces"}
		}
		lines = append(lines, yamlLine{indent: indent, text: strings.TrimRight(text[indent:], " \t"), num: i + 1})
	}
	if len(lines) == 0 {
		return nil, &Error{File: file, Line: 1, Msg: "the file is empty", Fix: "write the settings as key: value lines"}
	}
	p := &yamlParser{file: file, lines: lines}
	root, err := p.block(0, lines[0].indent)
	if err != nil {
		return nil, err
	}
	if p.i < len(lines) {
		l := lines[p.i]
		return nil, p.errAt(l, "this line is indented less than the block it ends, or more than the lines before", "align it with the keys of its mapping")
	}
	if root.kind != nodeObject {
		return nil, &Error{File: file, Line: lines[0].num, Msg: fmt.Sprintf("the top level is a %s; a config is a mapping of key: value lines", root.kind)}
	}
	return root, nil
}

// stripYAMLComment drops a # comment that starts the line or follows a space, outside quotes.
func stripYAMLComment(s string) string {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return s[:i]
		}
	}
	return s
}

type yamlParser struct {
	file  string
	lines []yamlLine
	i     int
}

func (p *yamlParser) errAt(l yamlLine, msg, fix string) *Error {
	return &Error{File: p.file, Line: l.num, Col: l.indent + 1, Msg: msg, Fix: fix}
}

// maxYAMLDepth bounds nesting, as maxDepth does for JSON.
const maxYAMLDepth = 64

// block reads the mapping or sequence whose lines start at column indent.
func (p *yamlParser) block(depth, indent int) (*node, error) {
	first := p.lines[p.i]
	if depth > maxYAMLDepth {
		return nil, p.errAt(first, fmt.Sprintf("values are nested more than %d levels deep", maxYAMLDepth), "flatten the structure")
	}
	if first.text == "-" || strings.HasPrefix(first.text, "- ") {
		return p.sequence(depth, indent)
	}
	n := &node{kind: nodeObject, line: first.num, col: indent + 1}
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.indent < indent {
			break
		}
		if l.indent > indent {
			return nil, p.errAt(l, "unexpected indentation", "align the key with the ones above it")
		}
		key, rest, ok := splitYAMLKey(l.text)
		if !ok {
			return nil, p.errAt(l, fmt.Sprintf("expected key: value, found %q", l.text), "write key: value")
		}
		if n.get(key) != nil {
			return nil, p.errAt(l, fmt.Sprintf("duplicate key %q", key), "keep one of the entries")
		}
		p.i++
		var v *node
		var err error
		switch {
		case rest != "":
			v, err = p.scalar(l, rest, l.indent+len(l.text)-len(rest)+1)
		case p.i < len(p.lines) && (p.lines[p.i].indent > indent ||
			(p.lines[p.i].indent == indent && strings.HasPrefix(p.lines[p.i].text, "- "))):
			v, err = p.block(depth+1, p.lines[p.i].indent)
		default:
			v = &node{kind: nodeNull, line: l.num, col: l.indent + 1}
		}
		if err != nil {
			return nil, err
		}
		n.keys = append(n.keys, key)
		n.vals = append(n.vals, v)
		n.kpos = append(n.kpos, pos{l.num, l.indent + 1})
	}
	return n, nil
}

// sequence reads "- item" lines at column indent.
func (p *yamlParser) sequence(depth, indent int) (*node, error) {
	n := &node{kind: nodeArray, line: p.lines[p.i].num, col: indent + 1}
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.indent != indent || !(l.text == "-" || strings.HasPrefix(l.text, "- ")) {
			break
		}
		item := strings.TrimSpace(strings.TrimPrefix(l.text, "-"))
		if _, _, isMap := splitYAMLKey(item); isMap && item != "" {
			return nil, p.errAt(l, "a mapping inside a list item", "write the list as [a, b] or one scalar per - line")
		}
		p.i++
		if item == "" {
			if p.i < len(p.lines) && p.lines[p.i].indent > indent {
				v, err := p.block(depth+1, p.lines[p.i].indent)
				if err != nil {
					return nil, err
				}
				n.elems = append(n.elems, v)
				continue
			}
			n.elems = append(n.elems, &node{kind: nodeNull, line: l.num})
			continue
		}
		v, err := p.scalar(l, item, l.indent+3)
		if err != nil {
			return nil, err
		}
		n.elems = append(n.elems, v)
	}
	return n, nil
}

// splitYAMLKey splits "key: rest" (or "key:"); the key may be quoted.
func splitYAMLKey(s string) (key, rest string, ok bool) {
	if s == "" || s[0] == '[' || s[0] == '{' || strings.HasPrefix(s, "- ") {
		return "", "", false
	}
	if s[0] == '"' || s[0] == '\'' {
		end := strings.IndexByte(s[1:], s[0])
		if end < 0 || !strings.HasPrefix(s[end+2:], ":") {
			return "", "", false
		}
		after := s[end+3:]
		if after != "" && after[0] != ' ' {
			return "", "", false
		}
		k, err := unquoteYAML(s[:end+2])
		return k, strings.TrimSpace(after), err == nil
	}
	i := strings.Index(s, ": ")
	if i < 0 {
		if strings.HasSuffix(s, ":") {
			return strings.TrimSpace(s[:len(s)-1]), "", true
		}
		return "", "", false
	}
	return strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+2:]), true
}

func unquoteYAML(s string) (string, error) {
	if s[0] == '\'' {
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'"), nil
	}
	return strconv.Unquote(s)
}

// scalar reads a value written on the key's line: a scalar or a one-line flow collection.
func (p *yamlParser) scalar(l yamlLine, s string, col int) (*node, error) {
	switch s[0] {
	case '&', '*', '!':
		return nil, p.errAt(l, "YAML anchors, aliases and tags are not read here", "write the value out in full")
	case '|', '>':
		return nil, p.errAt(l, "multi-line YAML strings are not read here", "write the value on one line, quoted")
	}
	f := &yamlFlow{s: s}
	v, err := f.value(0)
	if err == nil && strings.TrimSpace(f.s[f.i:]) != "" {
		err = fmt.Errorf("unexpected %q after the value", strings.TrimSpace(f.s[f.i:]))
	}
	if err != nil {
		return nil, p.errAt(l, err.Error(), "quote the value if it is text")
	}
	v.setPos(l.num, col)
	return v, nil
}

func (n *node) setPos(line, col int) {
	n.line, n.col = line, col
	for _, e := range n.elems {
		e.setPos(line, col)
	}
	for _, v := range n.vals {
		v.setPos(line, col)
	}
}

// yamlFlow reads one line's flow value: [a, b], {k: v}, or a scalar.
type yamlFlow struct {
	s string
	i int
}

func (f *yamlFlow) skip() {
	for f.i < len(f.s) && f.s[f.i] == ' ' {
		f.i++
	}
}

func (f *yamlFlow) value(depth int) (*node, error) {
	if depth > maxYAMLDepth {
		return nil, fmt.Errorf("values are nested more than %d levels deep", maxYAMLDepth)
	}
	f.skip()
	if f.i >= len(f.s) {
		return &node{kind: nodeNull}, nil
	}
	switch f.s[f.i] {
	case '[':
		f.i++
		n := &node{kind: nodeArray}
		for {
			f.skip()
			if f.i < len(f.s) && f.s[f.i] == ']' {
				f.i++
				return n, nil
			}
			v, err := f.value(depth + 1)
			if err != nil {
				return nil, err
			}
			n.elems = append(n.elems, v)
			if err := f.sep(']'); err != nil {
				return nil, err
			}
			if f.s[f.i-1] == ']' {
				return n, nil
			}
		}
	case '{':
		f.i++
		n := &node{kind: nodeObject}
		for {
			f.skip()
			if f.i < len(f.s) && f.s[f.i] == '}' {
				f.i++
				return n, nil
			}
			k, err := f.value(depth + 1)
			if err != nil {
				return nil, err
			}
			if k.kind == nodeObject || k.kind == nodeArray {
				return nil, fmt.Errorf("a flow mapping key must be a scalar")
			}
			f.skip()
			if f.i >= len(f.s) || f.s[f.i] != ':' {
				return nil, fmt.Errorf("expected : in a flow mapping")
			}
			f.i++
			v, err := f.value(depth + 1)
			if err != nil {
				return nil, err
			}
			key := k.str
			if k.kind != nodeString {
				key = k.compact()
			}
			n.set(key, v, pos{})
			if err := f.sep('}'); err != nil {
				return nil, err
			}
			if f.s[f.i-1] == '}' {
				return n, nil
			}
		}
	case '"', '\'':
		q := f.s[f.i]
		end := f.i + 1
		for end < len(f.s) {
			if f.s[end] == q && (q == '"' && f.s[end-1] != '\\' || q == '\'' && !(end+1 < len(f.s) && f.s[end+1] == '\'')) {
				break
			}
			if q == '\'' && f.s[end] == '\'' {
				end++ // '' inside single quotes
			}
			end++
		}
		if end >= len(f.s) {
			return nil, fmt.Errorf("unterminated quoted string")
		}
		str, err := unquoteYAML(f.s[f.i : end+1])
		if err != nil {
			return nil, fmt.Errorf("bad quoted string %s", f.s[f.i:end+1])
		}
		f.i = end + 1
		return &node{kind: nodeString, str: str}, nil
	}
	start := f.i
	for f.i < len(f.s) && !strings.ContainsRune(",]}", rune(f.s[f.i])) && !(f.s[f.i] == ':' && (f.i+1 == len(f.s) || f.s[f.i+1] == ' ')) {
		f.i++
	}
	return plainScalar(strings.TrimSpace(f.s[start:f.i])), nil
}

// sep consumes a comma or the closing bracket.
func (f *yamlFlow) sep(close byte) error {
	f.skip()
	if f.i >= len(f.s) {
		return fmt.Errorf("missing %c", close)
	}
	if f.s[f.i] == ',' || f.s[f.i] == close {
		f.i++
		return nil
	}
	return fmt.Errorf("expected , or %c, found %q", close, f.s[f.i])
}

// plainScalar types an unquoted scalar by YAML 1.2's core schema: null, booleans, numbers, else a string
// (so Accelerate's quoted 'no' and a plain no are both the string "no").
func plainScalar(s string) *node {
	switch s {
	case "", "~", "null", "Null", "NULL":
		return &node{kind: nodeNull}
	case "true", "True", "TRUE":
		return &node{kind: nodeBool, b: true}
	case "false", "False", "FALSE":
		return &node{kind: nodeBool, b: false}
	}
	if !strings.ContainsAny(s, "xXnN_") {
		// Written back as JSON numbers: "+1", "01" and ".5" are YAML, not JSON.
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return &node{kind: nodeNumber, num: strconv.FormatInt(i, 10)}
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return &node{kind: nodeNumber, num: strconv.FormatFloat(f, 'g', -1, 64)}
		}
	}
	return &node{kind: nodeString, str: s}
}
