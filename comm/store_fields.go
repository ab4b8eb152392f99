package comm

import (
	"fmt"
	"strings"
)

// Field is one setting every rank of a job must agree on (a DeepSpeed key,
// the sequence length, the data files), compared at the rendezvous. Values
// are short and human readable, so a mismatch is shown as it is.
type Field struct {
	Name, Value string
}

// maxListedFields is how many differing fields a join error names before it
// only counts the rest.
const maxListedFields = 10

// maxShownValue bounds one value in an error; longer ones are cut.
const maxShownValue = 120

// fieldsDisagreement describes how rank r's fields differ from rank 0's,
// or returns "" when they agree. Fields are matched by name, in rank 0's
// order, then those only rank r has.
func fieldsDisagreement(ref, got []Field, r int) string {
	type diff struct{ name, a, b string }
	have := make(map[string]string, len(got))
	for _, f := range got {
		have[f.Name] = f.Value
	}
	seen := make(map[string]bool, len(ref))
	var ds []diff
	for _, f := range ref {
		seen[f.Name] = true
		v, ok := have[f.Name]
		switch {
		case !ok:
			ds = append(ds, diff{f.Name, f.Value, "(absent)"})
		case v != f.Value:
			ds = append(ds, diff{f.Name, f.Value, v})
		}
	}
	for _, f := range got {
		if !seen[f.Name] {
			seen[f.Name] = true
			ds = append(ds, diff{f.Name, "(absent)", f.Value})
		}
	}
	if len(ds) == 0 {
		return ""
	}
	var b strings.Builder
	noun := "settings"
	if len(ds) == 1 {
		noun = "setting"
	}
	fmt.Fprintf(&b, "rendezvous: rank %d disagrees with rank 0 on %d %s: ", r, len(ds), noun)
	for i, d := range ds {
		if i == maxListedFields {
			fmt.Fprintf(&b, "; and %d more", len(ds)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		if i == 0 {
			fmt.Fprintf(&b, "%s: %s (rank 0) ≠ %s (rank %d)", d.name, shown(d.a), shown(d.b), r)
		} else {
			fmt.Fprintf(&b, "%s: %s ≠ %s", d.name, shown(d.a), shown(d.b))
		}
	}
	b.WriteString(". Every rank must run the same config, command line, data and gotrain version")
	return b.String()
}

// shown is a value as an error shows it: cut when long, "" made visible.
func shown(v string) string {
	if v == "" {
		return `""`
	}
	if len(v) > maxShownValue {
		cut := maxShownValue
		for cut > 0 && !isRuneStart(v[cut]) {
			cut--
		}
		return v[:cut] + "…"
	}
	return v
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
