package ncclcomm

import (
	"context"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/commtest"
	"github.com/gotrain/gotrain/cuda/cudatest"
)

// A collective's completion reaches the compute stream by an event and
// its caller by one event wait: no cuStreamQuery loop, every wait on an
// event that was recorded first, and host buffers staged with async
// copies on the Comm's stream instead of blocking copies on the legacy
// one.
func TestCompletionIsEventOrdered(t *testing.T) {
	cnt := cudatest.NewCounters(t)
	w := newWorld(t)
	ctx := context.Background()
	ranks := w.ranks(t, 2, nil)
	dev := f32s(t, ranks, 300)
	for r, rk := range ranks {
		vals := make([]float32, 300)
		for i := range vals {
			vals[i] = float32(r + i)
		}
		if err := backend.WriteF32(rk.Backend, dev[r], vals); err != nil {
			t.Fatal(err)
		}
	}
	const deviceCalls, hostCalls = 3, 2
	before := cnt.Snapshot(t)
	hosts := make([][]byte, 2)
	commtest.MustOnEveryRank(t, 2, func(r int) error {
		c := ranks[r].Comm
		for range deviceCalls {
			if err := c.AllReduce(ctx, dev[r], comm.Sum); err != nil {
				return err
			}
		}
		raw := make([]byte, 8)
		raw[0] = byte(r + 1) // int32 r+1, little-endian
		b := backend.NewBuffer(&backend.Memory{Host: raw, Pool: backend.Host, Bytes: len(raw)}, backend.I32, 2)
		for range hostCalls {
			if err := c.AllReduce(ctx, b, comm.Sum); err != nil {
				return err
			}
		}
		hosts[r] = raw
		return nil
	})
	d := cnt.Snapshot(t).Sub(before)
	t.Log(d.Detail())
	calls := int64(2 * (deviceCalls + hostCalls))
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"stream queries (polls)", d.StreamQueries, 0},
		{"waits on never-recorded events", d.UnrecordedWaits, 0},
		// compute→comm before the call and comm→compute after it.
		{"event records", d.EventRecords, 2 * calls},
		{"stream waits", d.EventWaits, 2 * calls},
		{"event syncs (one per call's caller)", d.EventSyncs, calls},
		{"stream syncs", d.StreamSyncs, 0},
		{"blocking host-to-device copies", d.BlockingHtoD, 0},
		{"blocking device-to-host copies", d.BlockingDtoH, 0},
		{"async staging copies (in and out)", d.AsyncCopies, 2 * 2 * hostCalls},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.got, c.want)
		}
	}
	// 1+2 summed over two ranks twice: 3, then 6.
	for r, raw := range hosts {
		if raw[0] != 6 || raw[4] != 0 {
			t.Errorf("rank %d: staged all-reduce left %v, want 6 then 0", r, raw)
		}
	}
	for r, rk := range ranks {
		got, err := backend.ReadF32(rk.Backend, dev[r])
		if err != nil {
			t.Fatal(err)
		}
		// Each all-reduce doubles the sum of the two ranks' values.
		for _, i := range []int{0, 299} {
			if want := float32(4 * (1 + 2*i)); got[i] != want {
				t.Errorf("rank %d [%d] = %v, want %v", r, i, got[i], want)
			}
		}
	}
}
