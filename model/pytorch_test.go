package model

import (
	"math"
	"path/filepath"
	"testing"
)

// TestPyTorchFixtures checks forward and backward against a GPT-2 written in
// plain PyTorch and run in float64 (testdata/make_fixtures.py): the weights
// go through LoadHF (config.json beside, Conv1D transposes), the batch, the
// logits, the loss and every gradient come from the fixture file.
func TestPyTorchFixtures(t *testing.T) {
	dir := filepath.Join("testdata", "pytorch_tiny")
	cfg, params, err := LoadHF(filepath.Join(dir, "model.safetensors"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (GPT2(Config{MaxT: 16, V: 50, Vp: 128, L: 2, NH: 2, C: 16})); cfg != want {
		t.Fatalf("config %+v, want %+v", cfg, want)
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

	// t_eff = atol + rtol·|ref|: fp32 against float64 math.
	const atol, rtol = 1e-5, 1e-4
	m := newModel(t, cfg, params, Options{})
	if _, err := m.Forward(inputs, nil, B, T); err != nil {
		t.Fatal(err)
	}
	wantLogits, lh, err := ref.ReadFloat32("logits")
	if err != nil || !equalShape(lh.Shape, []int{B, T, cfg.V}) {
		t.Fatalf("logits %v: %v", lh.Shape, err)
	}
	all, err := readBuffer(m, m.Logits())
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < N; n++ {
		for v := 0; v < cfg.V; v++ {
			got, want := float64(all[n*cfg.Vp+v]), float64(wantLogits[n*cfg.V+v])
			if !closeTo(got, want, atol, rtol) {
				t.Errorf("logit[%d,%d] = %.7g, PyTorch %.7g", n, v, got, want)
			}
		}
	}

	loss, err := m.Forward(inputs, targets, B, T)
	if err != nil {
		t.Fatal(err)
	}
	wantLoss, _, err := ref.ReadFloat32("loss")
	if err != nil {
		t.Fatal(err)
	}
	if !closeTo(float64(loss), float64(wantLoss[0]), atol, rtol) {
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
	var worst float64
	for _, ts := range m.Layout().Tensors() {
		want, h, err := ref.ReadFloat32("grad." + ts.Name)
		if err != nil {
			t.Fatal(err)
		}
		// Bring PyTorch's gradient into our layout as LoadHF does weights.
		ours := make([]float32, ts.Len)
		switch {
		case isConv1D(ts.Name):
			transpose(ours, want, h.Shape[0], h.Shape[1])
		default:
			copy(ours, want) // wte: the padded rows stay 0
		}
		got := grads[ts.Offset : ts.Offset+ts.Len]
		for i := range got {
			if !closeTo(float64(got[i]), float64(ours[i]), atol, rtol) {
				t.Errorf("grad %s[%d] = %.7g, PyTorch %.7g", ts.Name, i, got[i], ours[i])
			}
			worst = math.Max(worst, math.Abs(float64(got[i]-ours[i])))
		}
	}
	t.Logf("loss %.6f; largest gradient difference %.3g", loss, worst)
}
