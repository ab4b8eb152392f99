package cpu_test

import (
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/backendtest"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
)

func TestBackend(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backend.Backend {
		return cpu.New(cpu.Options{Gemm: blas.Gonum{}})
	})
}

// TestBackendDefaultGemm runs the suite with the GEMM gotrain uses by
// default: OpenBLAS where it loads and passes its self-check, gonum
// otherwise.
func TestBackendDefaultGemm(t *testing.T) {
	impl, info := blas.Default(0)
	t.Logf("gemm: %s %s threads=%d %s", info.Name, info.Library, info.Threads, info.Note)
	backendtest.Run(t, func(t *testing.T) backend.Backend {
		return cpu.New(cpu.Options{Gemm: impl})
	})
}

// TestBackendGoGemm runs the suite with the Go GEMM, whose bf16 GEMM the
// matmuls call with bf16 operands as they are (the VDPBF16PS kernel where
// the CPU has AVX512_BF16), so bf16 matmuls are checked against the
// float64 reference through that path too.
func TestBackendGoGemm(t *testing.T) {
	g := blas.NewGo(0)
	t.Logf("bf16 GEMM: %s", g.BF16Kernel())
	backendtest.Run(t, func(t *testing.T) backend.Backend {
		return cpu.New(cpu.Options{Gemm: g})
	})
}

// nativeLike is gonum's GEMM describing itself as a native library, so
// attention multiplies its tiles with it rather than with its own vector
// kernel, as it does with OpenBLAS.
type nativeLike struct{ blas.Gonum }

func (nativeLike) Info() blas.Info { return blas.Info{Name: "native-like", Threads: 2} }

// TestBackendThreads3 runs the suite with a fan-out that divides none of the
// test shapes, so every op's chunking has ragged edges, and with a GEMM
// that is not gonum's by name.
func TestBackendThreads3(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backend.Backend {
		return cpu.New(cpu.Options{Gemm: nativeLike{}, Threads: 3})
	})
}

// newGonum is the backend every benchmark measures: pure-Go GEMM, one
// goroutine per core.
func newGonum() *cpu.Backend { return cpu.New(cpu.Options{Gemm: blas.Gonum{}}) }

// gpt2-tiny shapes: B=8, T=256 (N=2048), C=256, NH=4, Vp=50304.
// Matmul OCs: 768 (qkv), 256 (attention projection), 1024 (fc), 50304
// (classifier); C=1024→OC=256 is the fc projection.

func BenchmarkMatmulForwardN2048C256OC768(b *testing.B) {
	backendtest.BenchMatmulForward(b, newGonum(), backend.F32, 2048, 256, 768)
}
func BenchmarkMatmulForwardN2048C256OC256(b *testing.B) {
	backendtest.BenchMatmulForward(b, newGonum(), backend.F32, 2048, 256, 256)
}
func BenchmarkMatmulForwardN2048C256OC1024(b *testing.B) {
	backendtest.BenchMatmulForward(b, newGonum(), backend.F32, 2048, 256, 1024)
}
func BenchmarkMatmulForwardN2048C1024OC256(b *testing.B) {
	backendtest.BenchMatmulForward(b, newGonum(), backend.F32, 2048, 1024, 256)
}
func BenchmarkMatmulForwardN2048C256OC50304(b *testing.B) {
	backendtest.BenchMatmulForward(b, newGonum(), backend.F32, 2048, 256, 50304)
}
func BenchmarkMatmulForwardBF16N2048C256OC768(b *testing.B) {
	backendtest.BenchMatmulForward(b, newGonum(), backend.BF16, 2048, 256, 768)
}
func BenchmarkMatmulBackwardN2048C256OC768(b *testing.B) {
	backendtest.BenchMatmulBackward(b, newGonum(), backend.F32, 2048, 256, 768)
}
func BenchmarkMatmulBackwardN2048C256OC256(b *testing.B) {
	backendtest.BenchMatmulBackward(b, newGonum(), backend.F32, 2048, 256, 256)
}
func BenchmarkMatmulBackwardN2048C256OC1024(b *testing.B) {
	backendtest.BenchMatmulBackward(b, newGonum(), backend.F32, 2048, 256, 1024)
}
func BenchmarkMatmulBackwardN2048C1024OC256(b *testing.B) {
	backendtest.BenchMatmulBackward(b, newGonum(), backend.F32, 2048, 1024, 256)
}
func BenchmarkMatmulBackwardN2048C256OC50304(b *testing.B) {
	backendtest.BenchMatmulBackward(b, newGonum(), backend.F32, 2048, 256, 50304)
}
func BenchmarkMatmulBackwardBF16N2048C256OC768(b *testing.B) {
	backendtest.BenchMatmulBackward(b, newGonum(), backend.BF16, 2048, 256, 768)
}

func BenchmarkAttentionForwardB8T256C256NH4(b *testing.B) {
	backendtest.BenchAttentionForward(b, newGonum(), backend.F32, 8, 256, 4, 4, 64)
}
func BenchmarkAttentionBackwardB8T256C256NH4(b *testing.B) {
	backendtest.BenchAttentionBackward(b, newGonum(), backend.F32, 8, 256, 4, 4, 64)
}
func BenchmarkAttentionForwardB8T64C768NH12(b *testing.B) {
	backendtest.BenchAttentionForward(b, newGonum(), backend.F32, 8, 64, 12, 12, 64)
}
func BenchmarkAttentionBackwardB8T64C768NH12(b *testing.B) {
	backendtest.BenchAttentionBackward(b, newGonum(), backend.F32, 8, 64, 12, 12, 64)
}
func BenchmarkAttentionForwardBF16B8T256C256NH4(b *testing.B) {
	backendtest.BenchAttentionForward(b, newGonum(), backend.BF16, 8, 256, 4, 4, 64)
}

func BenchmarkEncoderForwardB8T256C256(b *testing.B) {
	backendtest.BenchEncoderForward(b, newGonum(), backend.F32, 8, 256, 256, 50304)
}
func BenchmarkEncoderBackwardB8T256C256(b *testing.B) {
	backendtest.BenchEncoderBackward(b, newGonum(), backend.F32, 8, 256, 256, 50304)
}
func BenchmarkLayerNormForwardN2048C256(b *testing.B) {
	backendtest.BenchLayerNormForward(b, newGonum(), backend.F32, 2048, 256)
}
func BenchmarkLayerNormBackwardN2048C256(b *testing.B) {
	backendtest.BenchLayerNormBackward(b, newGonum(), backend.F32, 2048, 256)
}
func BenchmarkLayerNormForwardBF16N2048C256(b *testing.B) {
	backendtest.BenchLayerNormForward(b, newGonum(), backend.BF16, 2048, 256)
}
func BenchmarkGeluForwardN2097152(b *testing.B) {
	backendtest.BenchGeluForward(b, newGonum(), backend.F32, 2048*1024)
}
func BenchmarkGeluBackwardN2097152(b *testing.B) {
	backendtest.BenchGeluBackward(b, newGonum(), backend.F32, 2048*1024)
}
func BenchmarkAddN524288(b *testing.B) { backendtest.BenchAdd(b, newGonum(), backend.F32, 2048*256) }
func BenchmarkCrossEntropyForwardN2048V50257(b *testing.B) {
	backendtest.BenchCrossEntropyForward(b, newGonum(), backend.F32, 2048, 50257, 50304)
}
func BenchmarkCrossEntropyBackwardN2048V50257(b *testing.B) {
	backendtest.BenchCrossEntropyBackward(b, newGonum(), backend.F32, 2048, 50257, 50304)
}
func BenchmarkAdamWN4M(b *testing.B) {
	backendtest.BenchAdamW(b, newGonum(), backend.F32, false, 1<<22)
}
func BenchmarkAdamWBF16MasterN4M(b *testing.B) {
	backendtest.BenchAdamW(b, newGonum(), backend.BF16, true, 1<<22)
}
func BenchmarkSumSquaresN4M(b *testing.B) {
	backendtest.BenchSumSquares(b, newGonum(), backend.F32, 1<<22)
}

// TestFastBF16 follows the GEMM: the Go GEMM is fast in bf16 exactly where
// it has the pair kernel; gonum, which multiplies fp32 only, never is, and
// the note says what to use instead.
func TestFastBF16(t *testing.T) {
	g := blas.NewGo(1)
	if cpu.FastBF16(g) != g.NativeBF16() {
		t.Errorf("FastBF16(go) = %t, but the Go GEMM's native bf16 is %t", cpu.FastBF16(g), g.NativeBF16())
	}
	if cpu.FastBF16(blas.NewRecorder(g)) != g.NativeBF16() {
		t.Error("FastBF16 does not see the Go GEMM through a Recorder")
	}
	if cpu.FastBF16(blas.Gonum{}) {
		t.Error("FastBF16(gonum) = true")
	}
	if note := cpu.BF16Note(blas.Gonum{}); !strings.Contains(note, "gonum") || !strings.Contains(note, "--blas go") {
		t.Errorf("BF16Note(gonum) = %q: want the GEMM named and the alternative", note)
	}
}
