package model

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// familyCases are the Llama-family fixture cases (testdata/README.md).
var familyCases = []string{"llama_gqa", "llama_mqa_llama3rope", "llama_linear_rope", "qwen2_bias", "qwen3_qknorm", "mistral"}

// maxAbs is the largest |x|.
func maxAbs(x []float32) float64 {
	var m float64
	for _, v := range x {
		m = math.Max(m, math.Abs(float64(v)))
	}
	return m
}

// TestFamilyPyTorchFixtures checks forward and backward of every Llama,
// Mistral, Qwen2 and Qwen3 fixture against transformers' semantics run in
// float64 (testdata/make_llama_fixtures.py): the snapshot is loaded by HF
// names (single F32 file, or BF16 shards with an index), then the logits,
// the loss and every parameter gradient are compared with t_eff = atol +
// rtol·|ref|, rtol 1e-4 and atol 1e-5 of the tensor's largest magnitude
// (an fp32 run against float64 maths; the README's conditioning check
// supports 1e-4).
func TestFamilyPyTorchFixtures(t *testing.T) {
	for _, name := range familyCases {
		t.Run(name, func(t *testing.T) {
			dir := fixtureDir(name)
			cfg, params, err := LoadSnapshot(dir)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := OpenSafetensors(filepath.Join(dir, "forward_backward.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			inputs, ih, err := ref.ReadInt32("inputs")
			if err != nil {
				t.Fatal(err)
			}
			targets, _, err := ref.ReadInt32("targets")
			if err != nil {
				t.Fatal(err)
			}
			B, T := ih.Shape[0], ih.Shape[1]
			N := B * T
			const rtol = 1e-4
			check := func(what string, got, want []float32) float64 {
				t.Helper()
				atol := 1e-5 * maxAbs(want)
				var worst float64
				bad := 0
				for i := range want {
					d := math.Abs(float64(got[i]) - float64(want[i]))
					worst = math.Max(worst, d/(atol+rtol*math.Abs(float64(want[i]))))
					if !closeTo(float64(got[i]), float64(want[i]), atol, rtol) {
						if bad++; bad <= 3 {
							t.Errorf("%s[%d] = %.7g, PyTorch %.7g", what, i, got[i], want[i])
						}
					}
				}
				return worst
			}

			m := newModel(t, cfg, params, Options{})
			if _, err := m.Forward(inputs, nil, B, T); err != nil {
				t.Fatal(err)
			}
			wantLogits, lh, err := ref.ReadFloat32("logits")
			if err != nil || !equalShape(lh.Shape, []int{B, T, cfg.V}) || cfg.Vp != cfg.V {
				t.Fatalf("logits %v (Vp %d): %v", lh.Shape, cfg.Vp, err)
			}
			logits, err := readBuffer(m, m.Logits())
			if err != nil {
				t.Fatal(err)
			}
			worst := check("logits", logits, wantLogits)

			loss, err := m.Forward(inputs, targets, B, T)
			if err != nil {
				t.Fatal(err)
			}
			wantLoss, _, err := ref.ReadFloat32("loss")
			if err != nil {
				t.Fatal(err)
			}
			if !closeTo(float64(loss), float64(wantLoss[0]), 0, rtol) {
				t.Errorf("loss %.7f, PyTorch %.7f", loss, wantLoss[0])
			}
			m.ZeroGrad()
			if err := m.Backward(1 / float32(N)); err != nil {
				t.Fatal(err)
			}
			grads, err := m.HostGrads()
			if err != nil {
				t.Fatal(err)
			}
			seen := 0
			for _, ts := range m.Layout().Tensors() {
				want, h, err := ref.ReadFloat32("grad." + ts.Name)
				if err != nil {
					t.Fatal(err)
				}
				if !equalShape(h.Shape, ts.Shape) {
					t.Fatalf("grad.%s has shape %v, the layout %v", ts.Name, h.Shape, ts.Shape)
				}
				worst = math.Max(worst, check("grad "+ts.Name, grads[ts.Offset:ts.Offset+ts.Len], want))
				seen++
			}
			// Every gradient the fixture holds is one of the layout's.
			n := 0
			for _, h := range ref.Tensors() {
				if len(h.Name) > 5 && h.Name[:5] == "grad." {
					n++
				}
			}
			if n != seen {
				t.Errorf("the fixture has %d gradients, the layout %d tensors", n, seen)
			}
			t.Logf("%s: loss %.6f; worst |diff|/t_eff %.3f", cfg, loss, worst)
		})
	}
}

// TestRopeTablesMatchFixtures: the inverse frequencies (float32, as
// transformers computes them, llama3 and linear scaling) agree with
// PyTorch's to within one float32 ulp, and the cos/sin tables with the
// fixture's float64 tables rounded to float32.
func TestRopeTablesMatchFixtures(t *testing.T) {
	for _, name := range []string{"llama_mqa_llama3rope", "llama_linear_rope"} {
		path := filepath.Join(fixtureDir(name), "rope.safetensors")
		if _, err := os.Stat(path); err != nil {
			t.Fatal(err)
		}
		cfg, err := LoadHFConfig(filepath.Join(fixtureDir(name), "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		ref, err := OpenSafetensors(path)
		if err != nil {
			t.Fatal(err)
		}
		wantInv, _, _ := ref.ReadFloat32("inv_freq")
		wantCos, ch, _ := ref.ReadFloat32("cos")
		wantSin, _, _ := ref.ReadFloat32("sin")
		ref.Close()
		inv := RopeInvFreq(cfg)
		if len(inv) != len(wantInv) {
			t.Fatalf("%s: %d frequencies, want %d", name, len(inv), len(wantInv))
		}
		for j := range inv {
			if ulps(inv[j], wantInv[j]) > 1 {
				t.Errorf("%s: inv_freq[%d] = %.9g, PyTorch %.9g", name, j, inv[j], wantInv[j])
			}
		}
		T, h := ch.Shape[0], cfg.HD/2
		cos, sin := RopeTables(cfg, T)
		for tt := 0; tt < T; tt++ {
			for j := 0; j < h; j++ {
				for half := 0; half < 2; half++ { // the fixture repeats freqs: concat(freqs, freqs)
					k := tt*cfg.HD + half*h + j
					if math.Abs(float64(cos[tt*h+j]-wantCos[k])) > 2e-7 || math.Abs(float64(sin[tt*h+j]-wantSin[k])) > 2e-7 {
						t.Errorf("%s: position %d frequency %d: cos %.8g sin %.8g, fixture %.8g %.8g", name, tt, j, cos[tt*h+j], sin[tt*h+j], wantCos[k], wantSin[k])
					}
				}
			}
		}
	}
}

// ulps is the distance between two float32 values in units in the last
// place.
func ulps(a, b float32) int {
	ia, ib := int64(math.Float32bits(a)), int64(math.Float32bits(b))
	if ia > ib {
		return int(ia - ib)
	}
	return int(ib - ia)
}
