//go:build !(goexperiment.simd && amd64)

package cpu

// The decoder ops' row kernels. Builds without GOEXPERIMENT=simd (or not on
// amd64) run the scalar loops; decmath_simd_amd64.go has the vector ones.

func sumSquares(x []float32) float64        { return sumSquaresScalar(x) }
func scaleMul(o, x, w []float32, s float32) { scaleMulScalar(o, x, w, s) }
func rmsNormBackwardRow(o, pw, x, d, w []float32, s float32) {
	rmsNormBackwardRowScalar(o, pw, x, d, w, s)
}
func rotateHalf(o, x, c, s []float32)              { rotateHalfScalar(o, x, c, s, 0) }
func unrotateHalf(o, x, c, s []float32)            { unrotateHalfScalar(o, x, c, s, 0) }
func siluMul(o, g, u, e []float32)                 { siluMulScalar(o, g, u, e) }
func siluMulBackward(dg, du, d, g, u, e []float32) { siluMulBackwardScalar(dg, du, d, g, u, e) }
func addRow(o, x, y []float32)                     { addRowScalar(o, x, y) }

func (v fview) vload(off, n int, tmp []float32) []float32       { return v.load(off, n, tmp) }
func (v fview) vstore(off int, s []float32)                     { v.store(off, s) }
func (v fview) vstoreScaled(off int, x []float32, a, b float32) { v.storeScaled(off, x, a, b) }
func scaleRow(o, x []float32, a, b float32)                     { scaleRowScalar(o, x, a, b) }
func geluRow(o, x, e []float32)                                 { geluRowScalar(o, x, e) }
func geluBackwardRow(o, x, g, e []float32)                      { geluBackwardRowScalar(o, x, g, e) }
func adamwRow(w, g, mm, vm []float32, c adamwConsts)            { adamwRowScalar(w, g, mm, vm, c) }
