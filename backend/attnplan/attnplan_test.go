package attnplan

import (
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// Plans worked out by hand from the per-row cost 12·LD(T)+12·HD+4 bytes a
// query head: a 512 MiB budget holds 128 rows of any training shape here,
// so the cap sets them; a bf16 dqkv over several chunks sets fp32 dK, dV
// aside, one chunk or an fp32 dqkv does not; a budget of 1 MiB at B=2,
// NH=4, T=300, HD=64 fits (2^20 − 2560) / (8·(12·304+772)) = 29 rows,
// rounded down to 16 below T.
func TestNew(t *testing.T) {
	for _, c := range []struct {
		name              string
		B, T, NH, KV, HD  int
		dq, gemm          backend.DType
		budget            int
		rows, chunks, acc int
	}{
		{"bf16 several chunks", 1, 300, 4, 1, 64, backend.BF16, backend.BF16, Budget, 128, 3, 2 * 4 * 300 * 64},
		{"fp32 dqkv", 1, 300, 4, 1, 64, backend.F32, backend.F32, Budget, 128, 3, 0},
		{"bf16 one chunk", 1, 100, 4, 1, 64, backend.BF16, backend.BF16, Budget, 100, 1, 0},
		{"fp16 one chunk", 1, 100, 4, 1, 64, backend.F16, backend.F32, Budget, 100, 1, 2 * 4 * 100 * 64},
		{"bf16 from fp32 operands", 1, 100, 4, 1, 64, backend.BF16, backend.F32, Budget, 100, 1, 2 * 4 * 100 * 64},
		{"small budget", 2, 300, 4, 4, 64, backend.F32, backend.F32, 1 << 20, 16, 19, 0},
	} {
		p := New(c.B, c.T, c.NH, c.KV, c.HD, c.dq, c.gemm, c.budget)
		want := Plan{Rows: c.rows, Chunks: c.chunks, AccBytes: c.acc,
			Workspace: c.rows*c.B*c.NH*(12*((c.T+7)/8*8)+12*c.HD+4) + c.acc + 10*256}
		if p != want {
			t.Errorf("%s: %+v, want %+v", c.name, p, want)
		}
	}
}

// FuzzChunkRows: for any shape and budget the planner gives between 1 and
// min(T, 128) rows, a multiple of 16 unless it is T or below 16, and a
// workspace (rows at the worst case's cost, the set-aside bytes and the
// alignment slack) within the budget's power of two whenever one row fits
// it.
func FuzzChunkRows(f *testing.F) {
	f.Add(uint16(8), uint32(1024), uint16(12), uint16(64), uint32(0), uint32(Budget))
	f.Add(uint16(1), uint32(300), uint16(2), uint16(64), uint32(153600), uint32(1<<20))
	f.Add(uint16(4), uint32(4096), uint16(16), uint16(128), uint32(1<<27), uint32(1<<29))
	f.Fuzz(func(t *testing.T, b16 uint16, t32 uint32, nh16, hd16 uint16, fixed32, budget32 uint32) {
		B, T, NH, HD := int(b16%64)+1, int(t32%(1<<17))+1, int(nh16%128)+1, int(hd16%512)+1
		fixed, budget := int(fixed32%(1<<30)), int(budget32)
		rows := ChunkRows(B, T, NH, HD, fixed, budget)
		if rows < 1 || rows > min(T, 128) {
			t.Fatalf("B%d T%d NH%d HD%d fixed %d budget %d: %d rows", B, T, NH, HD, fixed, budget, rows)
		}
		if rows != T && rows > 16 && rows%16 != 0 {
			t.Fatalf("%d rows of %d: not a multiple of 16", rows, T)
		}
		limit := 1 << 12
		for limit*2 <= budget {
			limit *= 2
		}
		need := func(r int) int { return r*B*NH*(12*((T+7)&^7)+12*HD+4) + fixed + 10*256 }
		if need(1) <= limit && need(rows) > limit {
			t.Fatalf("B%d T%d NH%d HD%d fixed %d budget %d: %d rows need %d bytes, more than %d", B, T, NH, HD, fixed, budget,
				rows, need(rows), limit)
		}
	})
}
