//go:build !(goexperiment.simd && amd64)

package cpu

func attRowMax(x []float32) float32                 { return attRowMaxScalar(x) }
func attExpShiftSum(x []float32, c float32) float32 { return attExpShiftSumScalar(x, c) }
func attExpShift(x []float32, c float32)            { attExpShiftScalar(x, c) }
func attScale(x []float32, a float32)               { attScaleScalar(x, a) }
func attScaleTo(dst, src []float32, a float32)      { attScaleToScalar(dst, src, a) }
func attDot(a, b []float32) float32                 { return attDotScalar(a, b) }
func attDS(ds, p []float32, dd float32)             { attDSScalar(ds, p, dd) }
func attAdd(dst, src []float32)                     { attAddScalar(dst, src) }
