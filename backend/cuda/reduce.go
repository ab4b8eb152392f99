package cuda

import (
	"encoding/binary"
	"math"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/kernels"
)

// SumSquares implements backend.Backend: a kernel leaves one float64
// partial sum per block in scratch and the host adds them in block order,
// so the result is the same bits on every run. It waits for the stream.
// If the device fails the result is NaN (a step the caller will not
// take) and Sync reports the error.
func (b *Backend) SumSquares(x backend.Buffer) float64 {
	const op = "sum of squares"
	if b.hostOp(op, x) {
		return b.host.SumSquares(x)
	}
	if !x.DType().IsFloat() {
		panic("cuda: " + op + ": x must be a float buffer")
	}
	n := x.Len()
	blocks := kernels.SumSquaresBlocks(n)
	if blocks == 0 {
		return 0
	}
	// Scratch is lent by element type; two F32 slots hold one float64.
	parts, release, ok := b.scratch(kernels.F32, 2*blocks)
	if !ok {
		return math.NaN()
	}
	defer release()
	if err := b.k.SumSquares(b.stream, parts.Ptr, b.t(op, x), n); err != nil {
		b.check(op, err)
		return math.NaN()
	}
	raw := make([]byte, 8*blocks)
	if err := b.readDevice(raw, parts.Ptr); err != nil {
		b.check(op, err)
		return math.NaN()
	}
	var sum float64
	for i := 0; i < blocks; i++ {
		sum += math.Float64frombits(binary.NativeEndian.Uint64(raw[8*i:]))
	}
	return sum
}

// NonFinite implements backend.Backend: a kernel raises a device flag on
// any NaN or Inf, and the flag is read back (it waits for the stream). If
// the device fails the answer is true, so the caller skips the step, and
// Sync reports the error.
func (b *Backend) NonFinite(x backend.Buffer) bool {
	const op = "non-finite check"
	if b.hostOp(op, x) {
		return b.host.NonFinite(x)
	}
	if !x.DType().IsFloat() {
		panic("cuda: " + op + ": x must be a float buffer")
	}
	n := x.Len()
	if n == 0 {
		return false
	}
	flag, release, ok := b.scratch(kernels.I32, 1)
	if !ok {
		return true
	}
	defer release()
	if err := b.dev.MemsetD8Async(flag.Ptr, 0, 4, b.stream); err != nil {
		b.check(op, err)
		return true
	}
	if err := b.k.NonFinite(b.stream, flag, b.t(op, x), n); err != nil {
		b.check(op, err)
		return true
	}
	var raw [4]byte
	if err := b.readDevice(raw[:], flag.Ptr); err != nil {
		b.check(op, err)
		return true
	}
	return binary.NativeEndian.Uint32(raw[:]) != 0
}

// AddSum implements backend.Backend: one block adds x into acc on the
// stream; nothing waits.
func (b *Backend) AddSum(acc, x backend.Buffer) {
	const op = "add sum"
	if b.hostOp(op, acc, x) {
		b.host.AddSum(acc, x)
		return
	}
	needLen(op, "acc", acc, 1)
	if acc.DType() != backend.F32 || x.DType() != backend.F32 {
		panic("cuda: " + op + ": acc and x must be F32")
	}
	b.check(op, b.k.AddSum(b.stream, b.t(op, acc), b.t(op, x), x.Len()))
}
