package cpu_test

import (
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/backendtest"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
)

// TestBackendDecoder insists that the suite's decoder part runs on the CPU
// backend instead of skipping it as it does for backends without
// backend.DecoderOps. Five goroutines split the rows and tokens of the test
// shapes differently from TestBackend's and TestBackendThreads3's.
func TestBackendDecoder(t *testing.T) {
	ran := backendtest.RunDecoder(t, func(t *testing.T) backend.Backend {
		return cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 5})
	})
	if !ran {
		t.Fatal("the backend suite skipped the CPU backend's decoder ops: it no longer implements backend.DecoderOps")
	}
}

// Llama-family shapes: N = B·T = 2048 rows of C = 1024 (Qwen3-0.6B's
// hidden size), I = 2816 (Llama's 8C/3 rounded up to a multiple of 256),
// B4·T512 tokens of 16 query and 8 key/value heads of 64.

func BenchmarkRMSNormForwardN2048C1024(b *testing.B) {
	backendtest.BenchRMSNormForward(b, newGonum(), backend.F32, 2048, 1024)
}
func BenchmarkRMSNormForwardBF16N2048C1024(b *testing.B) {
	backendtest.BenchRMSNormForward(b, newGonum(), backend.BF16, 2048, 1024)
}
func BenchmarkRMSNormBackwardN2048C1024(b *testing.B) {
	backendtest.BenchRMSNormBackward(b, newGonum(), backend.F32, 2048, 1024)
}
func BenchmarkRMSNormBackwardBF16N2048C1024(b *testing.B) {
	backendtest.BenchRMSNormBackward(b, newGonum(), backend.BF16, 2048, 1024)
}
func BenchmarkResidualRMSNormForwardN2048C1024(b *testing.B) {
	backendtest.BenchResidualRMSNormForward(b, newGonum(), backend.F32, 2048, 1024)
}
func BenchmarkResidualRMSNormForwardBF16N2048C1024(b *testing.B) {
	backendtest.BenchResidualRMSNormForward(b, newGonum(), backend.BF16, 2048, 1024)
}
func BenchmarkQKVRotaryForwardB4T512NH16KV8HD64(b *testing.B) {
	backendtest.BenchQKVRotaryForward(b, newGonum(), backend.F32, false, 4, 512, 16, 8, 64)
}
func BenchmarkQKVRotaryForwardBF16B4T512NH16KV8HD64(b *testing.B) {
	backendtest.BenchQKVRotaryForward(b, newGonum(), backend.BF16, false, 4, 512, 16, 8, 64)
}
func BenchmarkQKVRotaryForwardQKNormB4T512NH16KV8HD64(b *testing.B) {
	backendtest.BenchQKVRotaryForward(b, newGonum(), backend.F32, true, 4, 512, 16, 8, 64)
}
func BenchmarkQKVRotaryForwardQKNormBF16B4T512NH16KV8HD64(b *testing.B) {
	backendtest.BenchQKVRotaryForward(b, newGonum(), backend.BF16, true, 4, 512, 16, 8, 64)
}
func BenchmarkQKVRotaryBackwardB4T512NH16KV8HD64(b *testing.B) {
	backendtest.BenchQKVRotaryBackward(b, newGonum(), backend.F32, false, 4, 512, 16, 8, 64)
}
func BenchmarkQKVRotaryBackwardBF16B4T512NH16KV8HD64(b *testing.B) {
	backendtest.BenchQKVRotaryBackward(b, newGonum(), backend.BF16, false, 4, 512, 16, 8, 64)
}
func BenchmarkQKVRotaryBackwardQKNormB4T512NH16KV8HD64(b *testing.B) {
	backendtest.BenchQKVRotaryBackward(b, newGonum(), backend.F32, true, 4, 512, 16, 8, 64)
}
func BenchmarkQKVRotaryBackwardQKNormBF16B4T512NH16KV8HD64(b *testing.B) {
	backendtest.BenchQKVRotaryBackward(b, newGonum(), backend.BF16, true, 4, 512, 16, 8, 64)
}
func BenchmarkSwiGLUForwardN2048I2816(b *testing.B) {
	backendtest.BenchSwiGLUForward(b, newGonum(), backend.F32, 2048, 2816)
}
func BenchmarkSwiGLUForwardBF16N2048I2816(b *testing.B) {
	backendtest.BenchSwiGLUForward(b, newGonum(), backend.BF16, 2048, 2816)
}
func BenchmarkSwiGLUBackwardN2048I2816(b *testing.B) {
	backendtest.BenchSwiGLUBackward(b, newGonum(), backend.F32, 2048, 2816)
}
func BenchmarkSwiGLUBackwardBF16N2048I2816(b *testing.B) {
	backendtest.BenchSwiGLUBackward(b, newGonum(), backend.BF16, 2048, 2816)
}
