package cublas

import (
	"math"
	"math/rand/v2"
)

// refBF16 rounds x to bfloat16 (8 significant bits, nearest, ties to even)
// by arithmetic on the significand, independently of the bit trick the
// mocks use; inputs here are normal numbers.
func refBF16(x float64) float64 {
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	f, e := math.Frexp(x) // x = f·2^e, |f| in [0.5, 1)
	return math.Ldexp(math.RoundToEven(f*256), e-8)
}

// bf16Bits encodes a value already representable in bfloat16.
func bf16Bits(x float64) uint16 { return uint16(math.Float32bits(float32(x)) >> 16) }

func bf16Value(h uint16) float64 { return float64(math.Float32frombits(uint32(h) << 16)) }

// poison fills the padding of every test matrix: a kernel that reads
// padding, or strides wrongly, pulls it into a result.
const poison = 1e6

// mat is a test matrix in float64: rows×cols as stored, with leading
// dimension ld, column-major (element (i, j) at i + j·ld) or row-major (at
// i·ld + j). Storage past the rows (columns) holds poison.
type mat struct {
	rows, cols, ld int
	rowMajor       bool
	v              []float64
}

func newMat(r *rand.Rand, rows, cols, ld int, rowMajor, bf16 bool) mat {
	outer := cols
	if rowMajor {
		outer = rows
	}
	m := mat{rows: rows, cols: cols, ld: ld, rowMajor: rowMajor, v: make([]float64, ld*max(outer, 1))}
	for i := range m.v {
		m.v[i] = poison
	}
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			x := r.Float64()*2 - 1
			if bf16 {
				x = refBF16(x)
			} else {
				x = float64(float32(x))
			}
			m.v[m.idx(i, j)] = x
		}
	}
	return m
}

func (m mat) idx(i, j int) int {
	if m.rowMajor {
		return i*m.ld + j
	}
	return i + j*m.ld
}

func (m mat) at(i, j int) float64 { return m.v[m.idx(i, j)] }

// opAt is element (i, j) of op(m).
func (m mat) opAt(t Op, i, j int) float64 {
	if t == Trans {
		return m.at(j, i)
	}
	return m.at(i, j)
}

// used reports whether storage index x holds an element (not padding).
func (m mat) used(x int) bool {
	inner, outer := x%m.ld, x/m.ld
	if m.rowMajor {
		return inner < m.cols && outer < m.rows
	}
	return inner < m.rows && outer < m.cols
}

func (m mat) f32() []float32 {
	out := make([]float32, len(m.v))
	for i, x := range m.v {
		out[i] = float32(x)
	}
	return out
}

func (m mat) bf16() []uint16 {
	out := make([]uint16, len(m.v))
	for i, x := range m.v {
		out[i] = bf16Bits(refBF16(x))
	}
	return out
}

// refGemm is the float64 reference of alpha·op(A)·op(B) + beta·C (+ bias[i]
// on row i, if bias is not nil) on the m×n block of c, indexed [i + j·m],
// and a bound on each element's fp32 error: an fp32 sum of k products is
// within about k·eps·Σ|a·b| of the exact one.
func refGemm(ta, tb Op, m, n, k int, alpha float64, a, b mat, beta float64, c mat, bias []float64) (ref, tol []float64) {
	ref = make([]float64, m*n)
	tol = make([]float64, m*n)
	const eps32 = 1.0 / (1 << 23)
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			var s, abs float64
			for p := 0; p < k; p++ {
				x := a.opAt(ta, i, p) * b.opAt(tb, p, j)
				s += x
				abs += math.Abs(x)
			}
			v := alpha * s
			mag := math.Abs(alpha) * abs
			if beta != 0 {
				v += beta * c.at(i, j)
				mag += math.Abs(beta * c.at(i, j))
			}
			if bias != nil {
				v += bias[i]
				mag += math.Abs(bias[i])
			}
			ref[i+j*m] = v
			tol[i+j*m] = float64(k+3)*eps32*mag + 1e-30
		}
	}
	return ref, tol
}

// withinBF16 reports whether got is ref rounded to bfloat16, allowing for
// the fp32 error tol before the rounding: within half a bf16 ulp
// (2^-8·|x| at most) of a value within tol of ref.
func withinBF16(got, ref, tol float64) bool {
	return math.Abs(got-ref) <= tol+math.Ldexp(math.Abs(ref)+tol, -8)
}
