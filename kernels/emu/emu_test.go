package emu_test

import (
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/kernels"
	"github.com/gotrain/gotrain/kernels/emu"
)

func selftest(t testing.TB) *emu.Library {
	t.Helper()
	src, err := os.ReadFile("testdata/selftest.cu")
	if err != nil {
		t.Fatal(err)
	}
	return emu.ForTestUnit(t, emu.Unit{Prelude: kernels.Prelude(),
		Sources: []kernels.Source{{Name: "selftest.cu", Text: string(src)}}})
}

// The self-test kernels are real CUDA: NVRTC compiles them for both
// targets, so the emulator is not accepting a dialect a GPU would not.
func TestSelftestKernelsCompileWithNVRTC(t *testing.T) {
	n, err := kernels.LoadNVRTC(kernels.NVRTCOptions{})
	if err != nil {
		if os.Getenv("GOTRAIN_REQUIRE_NVRTC") == "1" {
			t.Fatal(err)
		}
		t.Skipf("NVRTC not available: %v", err)
	}
	src, err := os.ReadFile("testdata/selftest.cu")
	if err != nil {
		t.Fatal(err)
	}
	for _, arch := range []kernels.SM{80, 90} {
		if _, err := n.Compile(kernels.Prelude()+string(src), "selftest.cu", arch, kernels.PTX); err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
	}
}

func TestIndicesCoverGridAndBlockIn3D(t *testing.T) {
	lib := selftest(t)
	grid, block := emu.Dim{X: 3, Y: 2, Z: 2}, emu.Dim{X: 4, Y: 3, Z: 2}
	n := 3 * 2 * 2 * 4 * 3 * 2
	out := emu.Alloc(4 * n)
	defer out.Free()
	if err := lib.Launch("emu_ids", grid, block, out); err != nil {
		t.Fatal(err)
	}
	got := out.Int32s()
	i := 0
	for bz := 0; bz < 2; bz++ {
		for by := 0; by < 2; by++ {
			for bx := 0; bx < 3; bx++ {
				for tz := 0; tz < 2; tz++ {
					for ty := 0; ty < 3; ty++ {
						for tx := 0; tx < 4; tx++ {
							want := int32(((((bz*10+by)*10+bx)*10+tz)*10+ty)*10 + tx)
							if got[i] != want {
								t.Fatalf("thread %d: got %d, want %d", i, got[i], want)
							}
							i++
						}
					}
				}
			}
		}
	}
}

func TestSharedMemoryAndSyncthreads(t *testing.T) {
	lib := selftest(t)
	const n, bs = 1000, 256 // last block partial
	x := emu.Alloc(4 * n)
	defer x.Free()
	v := x.Float32s()
	for i := range v {
		v[i] = float32(i)
	}
	if err := lib.Launch("emu_reverse", emu.Dim{X: (n + bs - 1) / bs}, emu.Dim{X: bs}, x, int32(n)); err != nil {
		t.Fatal(err)
	}
	for i := range v {
		start := i / bs * bs
		valid := min(bs, n-start)
		want := float32(start + valid - 1 - (i - start))
		if v[i] != want {
			t.Fatalf("x[%d] = %v, want %v", i, v[i], want)
		}
	}
}

func TestBlockReductions(t *testing.T) {
	lib := selftest(t)
	r := rand.New(rand.NewPCG(1, 2))
	for _, bs := range []uint32{32, 96, 256} {
		const blocks, n = 5, 777
		x, out := emu.Alloc(4*blocks*n), emu.Alloc(4*2*blocks)
		xs := x.Float32s()
		for i := range xs {
			// Integers: sums are exact whatever the order.
			xs[i] = float32(r.IntN(2001) - 1000)
		}
		if err := lib.Launch("emu_block_sum", emu.Dim{X: blocks}, emu.Dim{X: bs}, out, x, int32(n)); err != nil {
			t.Fatal(err)
		}
		for b := 0; b < blocks; b++ {
			sum, mx := 0.0, math.Inf(-1)
			partial := make([]float64, bs)
			for i := 0; i < n; i++ {
				sum += float64(xs[b*n+i])
				partial[i%int(bs)] += float64(xs[b*n+i])
			}
			for _, p := range partial {
				mx = math.Max(mx, p)
			}
			if got := out.Float32s(); float64(got[2*b]) != sum || float64(got[2*b+1]) != mx {
				t.Errorf("block size %d, block %d: sum %v max %v, want %v %v", bs, b, got[2*b], got[2*b+1], sum, mx)
			}
		}
		x.Free()
		out.Free()
	}
}

func TestShufflesAndVotes(t *testing.T) {
	lib := selftest(t)
	for _, width := range []int{32, 16, 8} {
		const blocks, bs = 2, 64
		out := emu.Alloc(4 * 8 * blocks * bs)
		if err := lib.Launch("emu_shuffles", emu.Dim{X: blocks}, emu.Dim{X: bs}, out, int32(width)); err != nil {
			t.Fatal(err)
		}
		got := out.Int32s()
		for b := 0; b < blocks; b++ {
			for tid := 0; tid < bs; tid++ {
				lane := tid % 32
				warpBase := tid - lane
				seg := lane / width * width
				val := func(l int) int32 { return int32(100 * (warpBase + l)) }
				inSeg := func(l int) bool { return l >= seg && l < seg+width }
				want := [8]int32{}
				if x := lane ^ 5; inSeg(x) {
					want[0] = val(x)
				} else {
					want[0] = val(lane)
				}
				if x := lane + 3; inSeg(x) {
					want[1] = val(x)
				} else {
					want[1] = val(lane)
				}
				if x := lane - 2; inSeg(x) {
					want[2] = val(x)
				} else {
					want[2] = val(lane)
				}
				want[3] = val(seg + 7%width)
				var ballot uint32
				for l := 0; l < 32; l++ {
					if l%3 == 0 {
						ballot |= 1 << l
					}
				}
				want[4] = int32(ballot)
				want[5] = 1
				want[6] = 0
				want[7] = val(lane ^ 1)
				g := got[8*(b*bs+tid) : 8*(b*bs+tid)+8]
				for k := range want {
					if g[k] != want[k] {
						t.Fatalf("width %d block %d thread %d result %d: got %d, want %d", width, b, tid, k, g[k], want[k])
					}
				}
			}
		}
		out.Free()
	}
}

func TestAtomics(t *testing.T) {
	lib := selftest(t)
	const n, bins = 10007, 13
	hist, casmax, fsum := emu.Alloc(4*bins), emu.Alloc(4), emu.Alloc(4)
	defer hist.Free()
	defer casmax.Free()
	defer fsum.Free()
	if err := lib.Launch("emu_atomics", emu.Dim{X: 7}, emu.Dim{X: 128}, hist, int32(bins), casmax, fsum, int32(n)); err != nil {
		t.Fatal(err)
	}
	wantMax := 0
	for i := 0; i < n; i++ {
		wantMax = max(wantMax, i*7919%1000)
	}
	for b, c := range hist.Int32s() {
		want := n / bins
		if b < n%bins {
			want++
		}
		if int(c) != want {
			t.Errorf("hist[%d] = %d, want %d", b, c, want)
		}
	}
	if got := casmax.Int32s()[0]; int(got) != wantMax {
		t.Errorf("CAS max = %d, want %d", got, wantMax)
	}
	if got := fsum.Float32s()[0]; got != n {
		t.Errorf("float atomicAdd count = %v, want %d", got, n)
	}
}

func TestUndefinedBehaviourFailsTheLaunch(t *testing.T) {
	lib := selftest(t)
	out := emu.Alloc(4 * 64)
	defer out.Free()
	cases := []struct {
		kernel string
		block  uint32
		want   string
	}{
		{"emu_deadlock", 32, "deadlock"},
		{"emu_divergent_sync", 32, "reaches __syncthreads at selftest.cu"},
		{"emu_partial_warp", 48, "reads lane 16"},
	}
	for _, c := range cases {
		err := lib.Launch(c.kernel, emu.Dim{X: 1}, emu.Dim{X: c.block}, out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.kernel, err, c.want)
		}
	}
	// The library is still usable after a failed launch.
	ids := emu.Alloc(4 * 32)
	defer ids.Free()
	if err := lib.Launch("emu_ids", emu.Dim{X: 1}, emu.Dim{X: 32}, ids); err != nil {
		t.Fatal(err)
	}
	if ids.Int32s()[31] != 31 {
		t.Errorf("after failures, emu_ids thread 31 wrote %d", ids.Int32s()[31])
	}
}

// The prelude's 16-bit conversions agree bit for bit with backend's.
func TestPreludeConversionsMatchBackend(t *testing.T) {
	lib := selftest(t)
	r := rand.New(rand.NewPCG(3, 4))
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 65504, 65520, 1e-8, 5.96e-8, 2.98e-8, 6.1e-5,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 3.4e38, 1.0000001, 0.33333334}
	for i := 0; i < 20000; i++ {
		vals = append(vals, math.Float32frombits(r.Uint32()))
	}
	n := len(vals)
	x, bf, h, back := emu.Alloc(4*n), emu.Alloc(2*n), emu.Alloc(2*n), emu.Alloc(8*n)
	defer x.Free()
	defer bf.Free()
	defer h.Free()
	defer back.Free()
	copy(x.Float32s(), vals)
	if err := lib.Launch("emu_convert", emu.Dim{X: 16}, emu.Dim{X: 128}, bf, h, back, x, int32(n)); err != nil {
		t.Fatal(err)
	}
	bfs, hs := bf.Bytes(), h.Bytes()
	for i, v := range vals {
		gb := uint16(bfs[2*i]) | uint16(bfs[2*i+1])<<8
		gh := uint16(hs[2*i]) | uint16(hs[2*i+1])<<8
		if want := backend.BF16FromF32(v); gb != want {
			t.Fatalf("bf16(%g = %#x) = %#x, want %#x", v, math.Float32bits(v), gb, want)
		}
		if want := backend.F16FromF32(v); gh != want {
			t.Fatalf("f16(%g = %#x) = %#x, want %#x", v, math.Float32bits(v), gh, want)
		}
		b := back.Float32s()
		if w := backend.F32FromBF16(gb); math.Float32bits(b[2*i]) != math.Float32bits(w) {
			t.Fatalf("bf16 %#x widened to %g, want %g", gb, b[2*i], w)
		}
		if w := backend.F32FromF16(gh); math.Float32bits(b[2*i+1]) != math.Float32bits(w) {
			t.Fatalf("f16 %#x widened to %g, want %g", gh, b[2*i+1], w)
		}
	}
}

// Under every schedule each block and thread still runs exactly once, and
// a kernel that exchanges data only through barriers gives the same result.
func TestSchedulesPermuteBlocksAndThreads(t *testing.T) {
	lib := selftest(t)
	runtime.LockOSThread() // the schedule is per OS thread
	defer runtime.UnlockOSThread()
	defer lib.SetSchedule(emu.Forward, 0)
	const n, bs = 1000, 256
	for _, sc := range []struct {
		s    emu.Schedule
		seed uint64
	}{{emu.Forward, 0}, {emu.Reverse, 0}, {emu.Shuffle, 1}, {emu.Shuffle, 2}} {
		lib.SetSchedule(sc.s, sc.seed)
		ids := emu.Alloc(4 * 3 * 2 * 4 * 3 * 2)
		if err := lib.Launch("emu_ids", emu.Dim{X: 3, Y: 2}, emu.Dim{X: 4, Y: 3, Z: 2}, ids); err != nil {
			t.Fatal(err)
		}
		seen := map[int32]bool{}
		for _, v := range ids.Int32s() {
			seen[v] = true
		}
		if len(seen) != len(ids.Int32s()) {
			t.Errorf("schedule %d/%d: %d distinct (block, thread) ids of %d", sc.s, sc.seed, len(seen), len(ids.Int32s()))
		}
		ids.Free()
		x := emu.Alloc(4 * n)
		v := x.Float32s()
		for i := range v {
			v[i] = float32(i)
		}
		if err := lib.Launch("emu_reverse", emu.Dim{X: (n + bs - 1) / bs}, emu.Dim{X: bs}, x, int32(n)); err != nil {
			t.Fatal(err)
		}
		for i := range v {
			start := i / bs * bs
			if want := float32(start + min(bs, n-start) - 1 - (i - start)); v[i] != want {
				t.Fatalf("schedule %d/%d: x[%d] = %v, want %v", sc.s, sc.seed, i, v[i], want)
			}
		}
		x.Free()
	}
}

// A kernel that reads shared memory another thread writes without a
// barrier in between gives a schedule-dependent answer: the schedules
// expose the race that index order hides.
func TestSchedulesExposeAMissingBarrier(t *testing.T) {
	lib := selftest(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer lib.SetSchedule(emu.Forward, 0)
	results := map[string]bool{}
	for _, s := range []emu.Schedule{emu.Forward, emu.Reverse} {
		lib.SetSchedule(s, 0)
		out := emu.Alloc(4 * 64)
		if err := lib.Launch("emu_racy", emu.Dim{X: 1}, emu.Dim{X: 64}, out); err != nil {
			t.Fatal(err)
		}
		results[string(out.Bytes())] = true
		out.Free()
	}
	if len(results) != 2 {
		t.Errorf("the racy kernel gave the same output under forward and reverse schedules; want two different answers")
	}
}

// The interleaving schedule switches threads at global-memory accesses,
// so a read-modify-write race that whole-thread orders never show loses
// updates there.
func TestInterleaveExposesALostUpdate(t *testing.T) {
	lib := selftest(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer lib.SetSchedule(emu.Forward, 0)
	const threads = 128
	for _, s := range []emu.Schedule{emu.Forward, emu.Reverse, emu.Shuffle, emu.Interleave} {
		lib.SetSchedule(s, 7)
		x := emu.Alloc(4)
		if err := lib.Launch("emu_lost_update", emu.Dim{X: 1}, emu.Dim{X: threads}, x); err != nil {
			t.Fatal(err)
		}
		got := x.Float32s()[0]
		x.Free()
		if s == emu.Interleave {
			if got >= threads {
				t.Errorf("interleaved: %v updates survived of %d; want lost updates", got, threads)
			}
		} else if got != threads {
			t.Errorf("schedule %d: %v, want %d", s, got, threads)
		}
	}
}
