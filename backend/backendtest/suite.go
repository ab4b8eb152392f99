// Package backendtest owns the one test suite every gotrain Backend runs:
// float64 reference implementations of every op (exported, for other
// packages' tests too), Run, which checks a Backend against them on normal
// and odd shapes, in fp32, bf16, fp16 and mixed storage, with every backward
// op also checked by finite differences, and benchmark helpers reporting
// GFLOP/s or bytes/s.
//
// Tolerances follow llm.c's rule |got − want| ≤ abs + rel·|want|, with abs
// scaled to the result's RMS. All randomness is a seeded PCG, so runs are
// deterministic.
package backendtest

import (
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// Run runs the whole suite as subtests of t. newBackend is called once per
// subtest and must return a fresh Backend; the suite frees everything it
// allocates.
func Run(t *testing.T, newBackend func(t *testing.T) backend.Backend) {
	t.Run("Memory", func(t *testing.T) { testMemory(t, newBackend) })
	t.Run("Transfer", func(t *testing.T) { testTransfer(t, newBackend) })
	t.Run("Casts", func(t *testing.T) { testCasts(t, newBackend) })
	t.Run("Encoder", func(t *testing.T) { testEncoder(t, newBackend) })
	t.Run("LayerNorm", func(t *testing.T) { testLayerNorm(t, newBackend) })
	t.Run("Matmul", func(t *testing.T) { testMatmul(t, newBackend) })
	t.Run("Attention", func(t *testing.T) { testAttention(t, newBackend) })
	t.Run("Gelu", func(t *testing.T) { testGelu(t, newBackend) })
	t.Run("Residual", func(t *testing.T) { testResidual(t, newBackend) })
	t.Run("CrossEntropy", func(t *testing.T) { testCrossEntropy(t, newBackend) })
	t.Run("FusedClassifier", func(t *testing.T) { testFusedClassifier(t, newBackend) })
	t.Run("AdamW", func(t *testing.T) { testAdamW(t, newBackend) })
	t.Run("Reduce", func(t *testing.T) { testReduce(t, newBackend) })
	t.Run("AddSum", func(t *testing.T) { testAddSum(t, newBackend) })
	t.Run("Dropout", func(t *testing.T) {
		if !RunDropout(t, newBackend) {
			t.Skip("the backend does not implement backend.Dropouter (LoRA's dropout)")
		}
	})
	t.Run("Decoder", func(t *testing.T) {
		if !RunDecoder(t, newBackend) {
			t.Skip("the backend does not implement backend.DecoderOps (the Llama family's ops)")
		}
	})
}

// dtypeCase says how a test stores activations (and their gradients) and
// parameters (and theirs). Statistics the interface fixes to F32 stay F32.
type dtypeCase struct {
	name       string
	act, param backend.DType
}

func dtypeCases() []dtypeCase {
	return []dtypeCase{
		{"fp32", backend.F32, backend.F32},
		{"bf16", backend.BF16, backend.BF16},
		{"fp16", backend.F16, backend.F16},
		{"mixed", backend.BF16, backend.F32},
	}
}

// shape is a GPT-2 layer shape. odd shapes use sizes that divide nothing
// (HS = 5, N = 21, V = 13 padded to 16) and get finite-difference checks.
type shape struct {
	name         string
	B, T, C, NH  int
	V, Vp        int
	odd          bool
	finiteDiffOK bool
}

func shapes() []shape {
	return []shape{
		{name: "B3T7C20NH4", B: 3, T: 7, C: 20, NH: 4, V: 13, Vp: 16, odd: true, finiteDiffOK: true},
		{name: "B4T64C64NH4", B: 4, T: 64, C: 64, NH: 4, V: 500, Vp: 512},
		{name: "B1T130C32NH2", B: 1, T: 130, C: 32, NH: 2, V: 77, Vp: 128},
	}
}

// each runs fn as a subtest for every shape and dtype case with a fresh
// harness seeded from both.
func each(t *testing.T, newBackend func(*testing.T) backend.Backend, fn func(h *harness, s shape, dc dtypeCase)) {
	for si, s := range shapes() {
		for di, dc := range dtypeCases() {
			t.Run(s.name+"/"+dc.name, func(t *testing.T) {
				fn(newHarness(t, newBackend, uint64(100*si+di+1)), s, dc)
			})
		}
	}
}
