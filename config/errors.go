package config

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem found in a config file. Every error names the file, the key path inside it (for example
// "zero_optimization.offload_optimizer.device"), the position when known, what is wrong, and how to fix it.
type Error struct {
	File string // file name as given to Load or Parse; "<config>" when none was given
	Path string // dotted key path; empty for syntax errors that precede any key
	Line int    // 1-based line of the offending value or key; 0 when the problem is not tied to one place
	Col  int    // 1-based column (in characters)
	Msg  string // what is wrong
	Fix  string // a concrete change that resolves it
}

func (e *Error) Error() string {
	var sb strings.Builder
	sb.WriteString(location(e.File, e.Line, e.Col))
	if e.Path != "" {
		sb.WriteString(e.Path)
		sb.WriteString(": ")
	}
	sb.WriteString(e.Msg)
	if e.Fix != "" {
		if strings.HasSuffix(e.Msg, "?") || strings.HasSuffix(e.Msg, ".") {
			sb.WriteString(" Fix: ")
		} else {
			sb.WriteString(". Fix: ")
		}
		sb.WriteString(e.Fix)
	}
	return sb.String()
}

func location(file string, line, col int) string {
	if file == "" {
		file = "<config>"
	}
	switch {
	case line > 0 && col > 0:
		return fmt.Sprintf("%s:%d:%d: ", file, line, col)
	case line > 0:
		return fmt.Sprintf("%s:%d: ", file, line)
	default:
		return file + ": "
	}
}

// Errors is every problem found in one config, in file order. Load and Parse return all of them together rather
// than stopping at the first, so one run of `gotrain config validate` shows everything to fix.
type Errors []*Error

func (es Errors) Error() string {
	switch len(es) {
	case 0:
		return "no errors"
	case 1:
		return es[0].Error()
	}
	lines := make([]string, 0, len(es)+1)
	lines = append(lines, fmt.Sprintf("%d problems in %s:", len(es), fileOf(es[0].File)))
	for _, e := range es {
		lines = append(lines, "  "+e.Error())
	}
	return strings.Join(lines, "\n")
}

func fileOf(f string) string {
	if f == "" {
		return "<config>"
	}
	return f
}

// sortErrors orders errors by position; errors without a position (cross-key checks) come last, by path.
func sortErrors(es Errors) {
	sort.SliceStable(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if (a.Line == 0) != (b.Line == 0) {
			return a.Line != 0
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Col != b.Col {
			return a.Col < b.Col
		}
		return a.Path < b.Path
	})
}

// Warning is a problem that does not stop training: a deprecated key that was mapped, an unknown key in lenient
// mode, a key gotrain accepts but does not implement, a suspicious but legal value. A Note is no problem but
// something the user should know they got (a schedule a flag filled in); it prints as "note: ".
type Warning struct {
	File string
	Path string
	Line int
	Col  int
	Msg  string
	Fix  string
	Note bool
}

func (w Warning) String() string {
	e := Error{File: w.File, Path: w.Path, Line: w.Line, Col: w.Col, Msg: w.Msg, Fix: w.Fix}
	if w.Note {
		return "note: " + e.Error()
	}
	return "warning: " + e.Error()
}
