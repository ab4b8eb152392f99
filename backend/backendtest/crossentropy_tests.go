package backendtest

import (
	"testing"

	"github.com/gotrain/gotrain/backend"
)

func testCrossEntropy(t *testing.T, nb func(*testing.T) backend.Backend) {
	each(t, nb, func(h *harness, s shape, dc dtypeCase) {
		N, V, Vp := s.B*s.T, s.V, s.Vp
		xs := h.normal(N*Vp, 2)
		for r := 0; r < N; r++ {
			for j := V; j < Vp; j++ {
				xs[r*Vp+j] = 300 // would swamp the softmax if a padded column entered it
			}
		}
		logits, logitsV := h.put(dc.act, xs)
		tg := h.ids(N, V)
		tg[0] = int32(V - 1) // the last real column
		targets := h.putInts(tg)
		losses, _ := h.put(backend.F32, nanFill(N))
		probs, _ := h.put(backend.F32, nanFill(N*Vp))
		h.be.CrossEntropyForward(losses, probs, logits, targets, N, V, Vp)
		wantL, wantP := make([]float64, N), make([]float64, N*Vp)
		RefCrossEntropyForward(wantL, wantP, logitsV, tg, N, V, Vp)
		check(h.t, "losses", h.get(losses), wantL, tolFor(backend.F32, wantL, 1e-5))
		gotP := h.get(probs)
		check(h.t, "probs", gotP, wantP, tolFor(backend.F32, wantP, 1e-5))
		checkPadZero(h.t, "probs", gotP, N, V, Vp)

		dloss := 1 / float64(N*3)
		dlogits, _ := h.put(dc.act, nanFill(N*Vp))
		h.be.CrossEntropyBackward(dlogits, probs, targets, float32(dloss), N, V, Vp)
		g := make([]float64, N*Vp)
		RefCrossEntropyBackward(g, wantP, tg, float64(float32(dloss)), N, V, Vp)
		got := h.get(dlogits)
		check(h.t, "dlogits", got, g, tolFor(dc.act, g, 1e-5))
		checkPadZero(h.t, "dlogits", got, N, V, Vp)

		// dlogits may overwrite probs in place.
		h.be.CrossEntropyBackward(probs, probs, targets, float32(dloss), N, V, Vp)
		check(h.t, "dlogits in place", h.get(probs), g, tolFor(backend.F32, g, 1e-5))

		if s.finiteDiffOK && dc.act == backend.F32 {
			l, p := make([]float64, N), make([]float64, N*Vp)
			one := make([]float64, N)
			for i := range one {
				one[i] = float64(float32(dloss))
			}
			L := func() float64 { RefCrossEntropyForward(l, p, logitsV, tg, N, V, Vp); return project(l, one) }
			fd := finiteDiff(logitsV, L)
			check(h.t, "ref dlogits vs finite differences", g, fd, fdTol(fd))
			check(h.t, "dlogits vs finite differences", got, fd, tolFor(backend.F32, fd, 1e-5))
		}
	})
}

// checkPadZero requires the padded columns V..Vp of every row to be exactly 0.
func checkPadZero(t *testing.T, name string, v []float64, N, V, Vp int) {
	t.Helper()
	for r := 0; r < N; r++ {
		for j := V; j < Vp; j++ {
			if v[r*Vp+j] != 0 {
				t.Fatalf("%s[%d,%d] = %g in a padded column, want 0", name, r, j, v[r*Vp+j])
			}
		}
	}
}

// testFusedClassifier checks the one-pass classifier against the float64
// reference: the losses with dloss = 0 leave the logits untouched; with
// dloss they are overwritten by dlogits in the logits' own dtype. A padded
// column holding 300 would swamp any softmax it entered.
func testFusedClassifier(t *testing.T, nb func(*testing.T) backend.Backend) {
	each(t, nb, func(h *harness, s shape, dc dtypeCase) {
		N, V, Vp := s.B*s.T, s.V, s.Vp
		xs := h.normal(N*Vp, 2)
		for r := 0; r < N; r++ {
			for j := V; j < Vp; j++ {
				xs[r*Vp+j] = 300
			}
		}
		logits, logitsV := h.put(dc.act, xs)
		tg := h.ids(N, V)
		tg[N-1] = int32(V - 1) // the last real column
		targets := h.putInts(tg)
		wantL, wantP := make([]float64, N), make([]float64, N*Vp)
		RefCrossEntropyForward(wantL, wantP, logitsV, tg, N, V, Vp)

		losses, _ := h.put(backend.F32, nanFill(N))
		h.be.FusedClassifier(losses, logits, targets, 0, N, V, Vp)
		check(h.t, "losses (dloss 0)", h.get(losses), wantL, tolFor(backend.F32, wantL, 1e-5))
		check(h.t, "logits after dloss 0", h.get(logits), logitsV, tol{})

		dloss := 1 / float64(N*3)
		losses, _ = h.put(backend.F32, nanFill(N))
		h.be.FusedClassifier(losses, logits, targets, float32(dloss), N, V, Vp)
		check(h.t, "losses", h.get(losses), wantL, tolFor(backend.F32, wantL, 1e-5))
		g := make([]float64, N*Vp)
		RefCrossEntropyBackward(g, wantP, tg, float64(float32(dloss)), N, V, Vp)
		got := h.get(logits)
		check(h.t, "dlogits", got, g, tolFor(dc.act, g, 1e-5))
		checkPadZero(h.t, "dlogits", got, N, V, Vp)

		if s.finiteDiffOK && dc.act == backend.F32 {
			l, p := make([]float64, N), make([]float64, N*Vp)
			one := make([]float64, N)
			for i := range one {
				one[i] = float64(float32(dloss))
			}
			L := func() float64 { RefCrossEntropyForward(l, p, logitsV, tg, N, V, Vp); return project(l, one) }
			fd := finiteDiff(logitsV, L)
			check(h.t, "dlogits vs finite differences", got, fd, tolFor(backend.F32, fd, 1e-5))
		}
	})
}
