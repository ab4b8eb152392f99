package nccl

import "testing"

// The NCCL releases built for CUDA 13 (2.27 and 2.28; NCCL_VERSION codes
// 22707 and 22809) keep every call, value and the version encoding gotrain
// uses: they load, decode, and run bf16 and Avg reductions and Finalize.
func TestCUDA13NCCLReleases(t *testing.T) {
	for _, c := range []struct{ code, version string }{{"22707", "2.27.7"}, {"22809", "2.28.9"}} {
		t.Run(c.version, func(t *testing.T) {
			w := newWorld(t, "MOCK_NCCL_VERSION="+c.code)
			if got := w.lib.Version().String(); got != c.version {
				t.Fatalf("Version() = %s, want %s", got, c.version)
			}
			cs := w.comms(t, 2)
			bf := []buffer{put(t, w.devs[0], []float64{1, 2}, Bfloat16), put(t, w.devs[1], []float64{3, 4}, Bfloat16)}
			f := []buffer{put(t, w.devs[0], []float64{1, 2}, Float32), put(t, w.devs[1], []float64{3, 4}, Float32)}
			w.mustEach(t, 2, func(r int) error { return cs[r].AllReduce(bf[r].ptr, bf[r].ptr, 2, Bfloat16, Sum, w.streams[r]) })
			w.mustEach(t, 2, func(r int) error { return cs[r].AllReduce(f[r].ptr, f[r].ptr, 2, Float32, Avg, w.streams[r]) })
			for r := 0; r < 2; r++ {
				w.sync(t, r)
				if got := get(t, w.devs[r], bf[r]); got[0] != 4 || got[1] != 6 {
					t.Errorf("rank %d bf16 sum: %v, want [4 6]", r, got)
				}
				if got := get(t, w.devs[r], f[r]); got[0] != 2 || got[1] != 3 {
					t.Errorf("rank %d avg: %v, want [2 3]", r, got)
				}
			}
			w.mustEach(t, 2, func(r int) error { return cs[r].Finalize() })
		})
	}
}
