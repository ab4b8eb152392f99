package config

import "fmt"

// Opt is a value that may be unset, for the keys DeepSpeed treats as None (steps_per_print, overlap_comm,
// communication_data_type, ...) and for Overrides, where "not given on the command line" differs from zero.
type Opt[T any] struct {
	V   T
	Set bool
}

// Some returns a set Opt holding v.
func Some[T any](v T) Opt[T] { return Opt[T]{V: v, Set: true} }

// Get returns the value and whether it is set.
func (o Opt[T]) Get() (T, bool) { return o.V, o.Set }

// Or returns the value if set, else def.
func (o Opt[T]) Or(def T) T {
	if o.Set {
		return o.V
	}
	return def
}

func (o Opt[T]) String() string {
	if !o.Set {
		return "None"
	}
	return fmt.Sprint(o.V)
}
