package cuda

import (
	"fmt"
	"testing"

	"github.com/gotrain/gotrain/backend/compare"
	cu "github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/kernels/emu"
)

// A GPU runs the blocks of a grid, and the threads of a block between
// barriers, in no promised order. Every op gives the same bits when the
// emulation runs blocks and threads in reverse or shuffled order as in
// index order: no kernel leans on an order the hardware does not give (a
// missing barrier, a race on shared or global memory, a block reading
// another block's output), which index order alone would hide.
func TestKernelsDoNotDependOnSchedule(t *testing.T) {
	e := newEnvDevices(t, 2)
	// Device 1 launches on its own OS thread: give that thread the
	// schedule under test, device 0 keeps index order.
	set := func(s emu.Schedule, seed uint64) {
		if err := e.devs[1].Do(func(*cu.Ctx) error { e.emu.SetSchedule(s, seed); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	defer set(emu.Forward, 0)
	for _, sc := range []struct {
		s    emu.Schedule
		seed uint64
	}{{emu.Reverse, 0}, {emu.Shuffle, 1}, {emu.Shuffle, 2}, {emu.Interleave, 3}} {
		set(sc.s, sc.seed)
		for si, s := range compare.Shapes() {
			for _, d := range compare.Mixes() {
				t.Run(fmt.Sprintf("schedule%d.%d/%s/%s", sc.s, sc.seed, s, d.Name), func(t *testing.T) {
					got, want := e.backendOn(t, e.devs[1]), e.backendOn(t, e.devs[0])
					res, err := compare.Run(got, want, s, d, uint64(si+1))
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range res {
						if !r.OK() || r.MaxErr != 0 {
							t.Errorf("%s (%s): differs between schedules (max relative difference %.3g) %s",
								r.Tensor, r.DType, r.MaxErr, r.Err)
						}
					}
				})
			}
		}
	}
}
