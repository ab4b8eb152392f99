package config

import "sort"

// KeyValue is one resolved key path and its value as `config explain` prints it.
type KeyValue struct {
	Path, Value string
}

// Values lists every resolved key of c (defaults, "auto" fills and inferences included) with its value,
// sorted by path. Two configs that train the same way list the same values, whatever the files' spelling,
// comments or key order: ranks compare these at the rendezvous and a resume compares them with the
// checkpoint's.
func (c *Config) Values() []KeyValue {
	out := make([]KeyValue, 0, len(c.entries))
	for p, e := range c.entries {
		if e == nil {
			continue
		}
		out = append(out, KeyValue{Path: p, Value: formatValue(e.v)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
