package zero_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/zero"
)

// recordingComm logs the collectives the engine issues: an all-gather by
// the group whose initial weights it delivered (so the log also proves the
// gathered values right), a reduce-scatter by the size class of its group.
type recordingComm struct {
	comm.Comm
	be      backend.Backend
	initial [][]float32 // each group's initial weights
	classOf map[int]string

	mu  sync.Mutex
	log []string
}

func (c *recordingComm) AllGather(ctx context.Context, dst, src backend.Buffer) error {
	if err := c.Comm.AllGather(ctx, dst, src); err != nil {
		return err
	}
	got, err := backend.ReadF32(c.be, dst)
	if err != nil {
		return err
	}
	label := "AG?"
	for g, w := range c.initial {
		if len(got) >= len(w) && slices.Equal(got[:len(w)], w) && allZero(got[len(w):]) {
			label = fmt.Sprintf("AG%d", g)
		}
	}
	c.record(label)
	return nil
}

func (c *recordingComm) ReduceScatter(ctx context.Context, dst, src backend.Buffer, op comm.Op) error {
	c.record("RS" + c.classOf[src.Len()])
	return c.Comm.ReduceScatter(ctx, dst, src, op)
}

func (c *recordingComm) record(s string) {
	c.mu.Lock()
	c.log = append(c.log, s)
	c.mu.Unlock()
}

func allZero(x []float32) bool {
	for _, v := range x {
		if v != 0 {
			return false
		}
	}
	return true
}

// Stage 3 issues its gathers in the model's order with prefetching and
// reuse as the package documentation describes, worked out by hand here
// for three blocks (groups 0 embeddings, 1–3 blocks, 4 the persistent final
// LayerNorm) over one forward and backward pass, and keeps the gathered
// elements within MaxLiveParameters. In the collectives "AGg" is an
// all-gather that delivered group g's initial weights; reduce-scatters are
// named by the size of their group.
func TestStage3GatherOrderAndPrefetch(t *testing.T) {
	cfg := model.GPT2(model.Config{MaxT: 16, V: 64, Vp: 128, L: 3, NH: 2, C: 32})
	const world = 2
	lay := model.NewLayout(cfg)
	_, n0 := lay.GroupRange(0)
	_, nb := lay.GroupRange(1)
	e0, eb := padded(n0, world), padded(nb, world)
	cases := []struct {
		name              string
		prefetch, maxLive int
		reuse             int
		overlap           bool
		want              string
		gathers           int
		prefetches, peak  int
		liveAfter         int
	}{
		{
			name: "no prefetch", prefetch: 0, maxLive: 1e9,
			want:    "AG0 AG1 AG2 AG3 | AG0 RSfinal AG3 RSblock AG2 RSblock AG1 RSblock RSemb",
			gathers: 8, prefetches: 0, peak: e0 + eb,
		},
		{
			name: "one block ahead", prefetch: eb, maxLive: e0 + 2*eb, overlap: true,
			want:    "AG0 AG1 AG2 AG3 | AG0 AG3 RSfinal AG2 RSblock AG1 RSblock RSblock RSemb",
			gathers: 8, prefetches: 6, peak: e0 + 2*eb,
		},
		{
			name: "live limit leaves room for one block", prefetch: eb, maxLive: e0 + eb,
			want:    "AG0 AG1 AG2 AG3 | AG0 AG3 RSfinal RSblock AG2 RSblock AG1 RSblock RSemb",
			gathers: 8, prefetches: 2, peak: e0 + eb,
		},
		{
			// Every released group is needed again within the distance and
			// nothing limits the live total: backward gathers nothing.
			name: "reuse everything", prefetch: 0, maxLive: 1e9, reuse: 1e9,
			want:    "AG0 AG1 AG2 AG3 | RSfinal RSblock RSblock RSblock RSemb",
			gathers: 4, prefetches: 0, peak: e0 + 3*eb, liveAfter: e0 + 3*eb,
		},
		{
			// Only groups whose next use is at most the embeddings away stay:
			// block 2 (backward needs it right after the embeddings), the
			// embeddings themselves, and block 0 at the end of backward.
			name: "reuse what the next pass starts with", prefetch: 0, maxLive: 1e9, reuse: e0 + 1,
			want:    "AG0 AG1 AG2 AG3 | RSfinal RSblock AG2 RSblock AG1 RSblock RSemb",
			gathers: 6, prefetches: 0, peak: e0 + eb, liveAfter: e0 + eb,
		},
		{
			// Retention within the live limit: a prefetch evicts the
			// retained window needed farthest ahead (block 0 for block 2 in
			// forward, block 2 for block 0 in backward), and backward
			// regathers only block 0.
			name: "reuse and prefetch under the live limit", prefetch: eb, maxLive: e0 + 2*eb, reuse: 1e9, overlap: true,
			want:    "AG0 AG1 AG2 AG3 | RSfinal RSblock AG1 RSblock RSblock RSemb",
			gathers: 5, prefetches: 4, peak: e0 + 2*eb, liveAfter: e0 + 2*eb,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			envs := newWorld(t, world)
			r := testRun(cfg, world, 1)
			r.gas = 1
			o := zero.DefaultOptions(3)
			o.PersistenceThreshold = int64(2 * cfg.C)
			o.PrefetchBucketSize, o.MaxLiveParameters, o.OverlapComm = int64(tc.prefetch), int64(tc.maxLive), tc.overlap
			o.MaxReuseDistance = int64(tc.reuse)
			initial := make([][]float32, lay.NumGroups())
			for g := range initial {
				initial[g] = model.InitGroup(lay, r.seed, g)
			}
			_, nf := lay.GroupRange(lay.NumGroups() - 1)
			classOf := map[int]string{e0: "emb", eb: "block", padded(nf, world): "final"}
			recs := make([]*recordingComm, world)
			stats := make([]zero.Stats, world)
			errs := onEveryRank(world, func(rank int) error {
				ctx := context.Background()
				recs[rank] = &recordingComm{Comm: envs[rank].c, be: envs[rank].be, initial: initial, classOf: classOf}
				env := *envs[rank]
				env.c = recs[rank]
				s, err := newRank(ctx, &env, r, o)
				if err != nil {
					return err
				}
				defer s.close()
				in, tg := r.batch(1, 0)
				if _, err := s.m.Forward(r.rows(in, rank), r.rows(tg, rank), r.B, r.T); err != nil {
					return err
				}
				recs[rank].record("|")
				if err := s.m.Backward(1); err != nil {
					return err
				}
				if err := s.eng.ZeroGrad(); err != nil { // waits for the reductions
					return err
				}
				stats[rank] = s.eng.Stats()
				return nil
			})
			if err := firstErr(errs); err != nil {
				t.Fatal(err)
			}
			for rank := range world {
				if got := strings.Join(recs[rank].log, " "); got != tc.want {
					t.Errorf("rank %d collectives:\n got  %s\n want %s", rank, got, tc.want)
				}
				st := stats[rank]
				if st.Gathers != tc.gathers || st.Prefetches != tc.prefetches || st.PeakLiveElements != tc.peak || st.LiveElements != tc.liveAfter {
					t.Errorf("rank %d stats %+v; want %d gathers, %d prefetches, peak %d, %d live after", rank, st, tc.gathers, tc.prefetches, tc.peak, tc.liveAfter)
				}
				if st.PeakLiveElements > tc.maxLive && tc.prefetch > 0 {
					t.Errorf("rank %d: %d elements live, over the limit %d", rank, st.PeakLiveElements, tc.maxLive)
				}
			}
		})
	}
}
