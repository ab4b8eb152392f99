package meta

import "github.com/gotrain/gotrain/backend"

// Call is one op call as a Backend with Options.Trace records it: the op's
// name (the Backend method's), its dimensions by name in the order of the
// method's parameters, and every buffer argument. A cost model counts FLOPs
// from Op and Dims and bytes moved from Args.
type Call struct {
	Op   string
	Dims []Dim
	Args []Arg
}

// Dim is one named dimension of a call ("N", "C", …).
type Dim struct {
	Name  string
	Value int
}

// Arg is one buffer argument of a call; an absent optional buffer (the
// zero Buffer) is not listed.
type Arg struct {
	Name  string
	DType backend.DType
	Len   int
	Pool  backend.Pool
	Write bool // the op writes it (parameter gradients are read and written)
}

// Bytes is the argument's size.
func (a Arg) Bytes() int64 { return int64(a.Len) * int64(a.DType.Size()) }

// Dim returns the value of the named dimension, and whether the call has it.
func (c Call) Dim(name string) (int, bool) {
	for _, d := range c.Dims {
		if d.Name == name {
			return d.Value, true
		}
	}
	return 0, false
}

// Trace returns the calls recorded so far, oldest first (nil unless
// Options.Trace). The slice is a copy.
func (be *Backend) Trace() []Call {
	be.mu.Lock()
	defer be.mu.Unlock()
	return append([]Call(nil), be.trace...)
}

// ResetTrace forgets the calls recorded so far.
func (be *Backend) ResetTrace() {
	be.mu.Lock()
	defer be.mu.Unlock()
	be.trace = nil
}

func arg(name string, b backend.Buffer, write bool) Arg {
	return Arg{Name: name, DType: b.DType(), Len: b.Len(), Pool: b.Pool(), Write: write}
}

func dims(kv ...any) []Dim {
	out := make([]Dim, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, Dim{Name: kv[i].(string), Value: kv[i+1].(int)})
	}
	return out
}

func (be *Backend) record(op string, d []Dim, args ...Arg) {
	if !be.tracing {
		return
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	be.trace = append(be.trace, Call{Op: op, Dims: d, Args: args})
}
