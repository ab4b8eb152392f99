package comm_test

import (
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/commtest"
)

// Solo is the one-rank world: every collective is the identity or a copy,
// and nothing crosses a wire, so Stats stay empty.
func TestSoloConformance(t *testing.T) {
	commtest.Run(t, func(t *testing.T, size int, _ time.Duration) []commtest.Rank {
		if size != 1 {
			t.Fatalf("comm.Solo is a world of one rank, not %d", size)
		}
		be := cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
		return []commtest.Rank{{Comm: comm.NewSolo(be), Backend: be}}
	}, commtest.Options{Sizes: []int{1}, NoStats: true})
}
