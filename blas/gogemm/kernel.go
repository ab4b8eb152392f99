package gogemm

// kernel is a micro-kernel and its tile: fn computes the mr×nr tile
// C = alpha·Σₚ a[p·mr+i]·b[p·nr+j] + beta·C for k steps over packed panels
// a (mr·k floats) and b (nr·k floats), C row-major with leading dimension
// ldc. With beta = 0, C is not read.
type kernel struct {
	name   string
	mr, nr int
	fn     func(k int, a, b, c []float32, ldc int, alpha, beta float32)
}

// Bounds on every kernel's tile, for the edge buffer.
const (
	maxMR = 16
	maxNR = 32
)

// genericMR, genericNR: the portable kernel's tile. 4×16 accumulators
// spill to memory without vector registers anyway; the shape keeps the
// inner loop a straight run of 16 multiply-adds per A element.
const (
	genericMR = 4
	genericNR = 16
)

func genericKernel() kernel {
	return kernel{name: "generic 4×16", mr: genericMR, nr: genericNR, fn: kernelGeneric}
}

// kernelGeneric is the portable micro-kernel.
func kernelGeneric(k int, a, b, c []float32, ldc int, alpha, beta float32) {
	var acc [genericMR][genericNR]float32
	a = a[:k*genericMR]
	b = b[:k*genericNR]
	for p := range k {
		bp := (*[genericNR]float32)(b[p*genericNR:])
		ap := (*[genericMR]float32)(a[p*genericMR:])
		for i := range genericMR {
			x := ap[i]
			row := &acc[i]
			for j := range genericNR {
				row[j] += x * bp[j]
			}
		}
	}
	for i := range genericMR {
		row := c[i*ldc : i*ldc+genericNR]
		for j := range row {
			v := alpha * acc[i][j]
			if beta != 0 {
				v += beta * row[j]
			}
			row[j] = v
		}
	}
}
