package cuda

import (
	"testing"

	"github.com/gotrain/gotrain/backend/compare"
	"github.com/gotrain/gotrain/kernels"
)

// TestOpsMatchCPUBackend runs every op on small and awkward shapes in every
// storage mix on both backends, then checks that each kernel of the program
// ran at least once under emulation: the count of kernels tested equals the
// count of kernels in kernels/*.cu.
func TestOpsMatchCPUBackend(t *testing.T) {
	e := newEnv(t)
	for si, s := range compare.Shapes() {
		for _, d := range compare.Mixes() {
			t.Run(s.String()+"/"+d.Name, func(t *testing.T) {
				res, err := compare.Run(e.backend(t), newHost(), s, d, uint64(si+1))
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range res {
					if !r.OK() {
						t.Errorf("%s (%s): %d of %d elements over %.1e (max %.3g) %s", r.Tensor, r.DType, r.Bad, r.N,
							r.Tol, r.MaxErr, r.Err)
					}
				}
			})
		}
	}
	if t.Failed() {
		return
	}
	names := kernels.KernelNames()
	if got := len(e.emu.Names()); got != len(names) {
		t.Errorf("the emulation library has %d kernels, kernels/*.cu defines %d", got, len(names))
	}
	tested := 0
	for _, n := range names {
		if e.emu.Launches(n) > 0 {
			tested++
		} else {
			t.Errorf("kernel %s never ran under emulation", n)
		}
	}
	if tested != len(names) {
		t.Errorf("%d of %d kernels tested", tested, len(names))
	}
	t.Logf("%d of %d kernels ran under emulation and matched the CPU backend", tested, len(names))
}
