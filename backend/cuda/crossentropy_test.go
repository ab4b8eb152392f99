package cuda

import (
	"math/rand/v2"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/compare"
)

// dlogits may share storage with probs in ways other than being probs
// itself: bf16 gradients written over the start of the F32 probabilities,
// or F32 gradients one row further on. Written directly, rows would
// overwrite probabilities other threads and blocks have not read yet
// (Vp = 320 spans more than a block's 256 threads); the backend must give
// what the CPU backend gives with separate buffers.
func TestCrossEntropyBackwardOverlappingProbs(t *testing.T) {
	e := newEnv(t)
	const N, V, Vp = 5, 300, 320
	r := rand.New(rand.NewPCG(8, 1))
	logitsV := normals(r, N*Vp)
	tg := make([]int32, N)
	for i := range tg {
		tg[i] = int32(r.IntN(V))
	}
	const dloss = 0.2

	// The reference: the CPU backend with separate buffers.
	c := newHost()
	cTg, err := c.Alloc(backend.Device, backend.Activations, backend.I32, N)
	if err != nil {
		t.Fatal(err)
	}
	if err := backend.WriteI32(c, cTg, tg); err != nil {
		t.Fatal(err)
	}
	cLogits, cLoss := upload(t, c, backend.F32, logitsV), upload(t, c, backend.F32, make([]float32, N))
	cProbs := upload(t, c, backend.F32, make([]float32, N*Vp))
	c.CrossEntropyForward(cLoss, cProbs, cLogits, cTg, N, V, Vp)

	for _, tc := range []struct {
		name string
		dt   backend.DType
		rows int // rows of the allocation
		view func(probs backend.Buffer) backend.Buffer
	}{
		{"bf16 over the start of probs", backend.BF16, N, func(p backend.Buffer) backend.Buffer {
			return backend.NewBuffer(p.Mem(), backend.BF16, N*Vp)
		}},
		{"fp32 one row on", backend.F32, N + 1, func(p backend.Buffer) backend.Buffer {
			return backend.NewBuffer(p.Mem(), backend.F32, (N+1)*Vp).Slice(Vp, N*Vp)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := upload(t, c, tc.dt, make([]float32, N*Vp))
			c.CrossEntropyBackward(want, cProbs, cTg, dloss, N, V, Vp)

			g := e.backend(t)
			gTg, err := g.Alloc(backend.Device, backend.Activations, backend.I32, N)
			if err != nil {
				t.Fatal(err)
			}
			if err := backend.WriteI32(g, gTg, tg); err != nil {
				t.Fatal(err)
			}
			store := upload(t, g, backend.F32, make([]float32, tc.rows*Vp))
			probs := store.Slice(0, N*Vp)
			g.CrossEntropyForward(upload(t, g, backend.F32, make([]float32, N)), probs, upload(t, g, backend.F32, logitsV),
				gTg, N, V, Vp)
			dlogits := tc.view(store)
			g.CrossEntropyBackward(dlogits, probs, gTg, dloss, N, V, Vp)
			if err := g.Sync(); err != nil {
				t.Fatal(err)
			}
			agree(t, "dlogits", download(t, g, dlogits), download(t, c, want), compare.Tol(tc.dt))
		})
	}
}
