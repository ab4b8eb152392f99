package emu_test

import (
	"testing"

	"github.com/gotrain/gotrain/kernels/emu"
)

// BenchmarkBarrierB256 reports the emulator's cost per thread per
// synchronisation point (a __syncthreads and a shuffle, which takes two
// warp barriers): each is a switch between fibers.
func BenchmarkBarrierB256(b *testing.B) {
	lib := selftest(b)
	const threads, iters = 256, 200
	out := emu.Alloc(4 * threads)
	defer out.Free()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := lib.Launch("emu_barriers", emu.Dim{X: 1}, emu.Dim{X: threads}, out, int32(iters)); err != nil {
			b.Fatal(err)
		}
	}
	syncs := float64(b.N) * threads * iters * 3
	b.ReportMetric(b.Elapsed().Seconds()*1e9/syncs, "ns/thread-sync")
}
