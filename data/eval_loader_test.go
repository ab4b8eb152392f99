package data

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// evalPass runs one pass of an eval loader on each of world ranks and
// returns, in (batch, rank, row) order, every row served with a target
// that is not ignored, and each rank's batch count.
func evalPass(t *testing.T, opts LoaderOptions, world, maxBatches int) (rows [][2][]int32, batches []int64) {
	t.Helper()
	loaders := make([]*EvalLoader, world)
	for r := range loaders {
		o := opts
		o.Rank, o.WorldSize = r, world
		e, err := NewEvalLoader(o, maxBatches)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		loaders[r] = e
		batches = append(batches, e.NumBatches())
	}
	B, T := opts.B, opts.T
	in, tg := make([]int32, B*T), make([]int32, B*T)
	for {
		done := 0
		for r, e := range loaders {
			n, err := e.Next(in, tg)
			if errors.Is(err, io.EOF) {
				done++
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if n < 1 || n > B {
				t.Fatalf("rank %d: %d rows served, want 1..%d", r, n, B)
			}
			for i := range n {
				row := [2][]int32{slices.Clone(in[i*T : (i+1)*T]), slices.Clone(tg[i*T : (i+1)*T])}
				if slices.ContainsFunc(row[1], func(x int32) bool { return x >= 0 }) {
					rows = append(rows, row)
				}
			}
		}
		if done == world {
			return rows, batches
		}
		if done != 0 {
			t.Fatalf("%d of %d ranks ended their pass early", done, world)
		}
	}
}

// The defect: evaluation read ⌊tokens/(B·T·N)⌋ llm.c chunks and never the
// rest, so some of the split was never scored. Every target of a token
// stream (each shard's tokens after its first) must be scored exactly
// once per pass, in order, with the last window of a shard and the last
// batch partial, on every world size, and the ranks must agree on the
// number of batches.
func TestEvalLoaderScoresEveryTokenOnce(t *testing.T) {
	dir := t.TempDir()
	seqShard(t, filepath.Join(dir, "val_000000.bin"), 0, 100)
	seqShard(t, filepath.Join(dir, "val_000001.bin"), 30000, 60)
	// The reference: every (input, next token) pair of each shard, in order.
	var want [][2]int32
	for _, sh := range [][2]int32{{0, 100}, {30000, 60}} {
		for p := sh[0]; p < sh[0]+sh[1]-1; p++ {
			want = append(want, [2]int32{p, p + 1})
		}
	}
	const T = 3
	for _, c := range []struct{ B, world int }{{2, 2}, {1, 1}, {4, 3}, {8, 2}, {64, 2}} {
		t.Run(fmt.Sprintf("B%d-N%d", c.B, c.world), func(t *testing.T) {
			opts := LoaderOptions{Shards: []string{filepath.Join(dir, "val_*.bin")}, B: c.B, T: T, Vocab: 50257}
			rows, batches := evalPass(t, opts, c.world, 0)
			windows := 33 + 20 // ⌈99/3⌉ + ⌈59/3⌉
			wantBatches := int64((windows + c.B*c.world - 1) / (c.B * c.world))
			for r, n := range batches {
				if n != wantBatches {
					t.Errorf("rank %d: %d batches, want %d", r, n, wantBatches)
				}
			}
			var got [][2]int32
			for _, row := range rows {
				for i := range T {
					if row[1][i] >= 0 {
						got = append(got, [2]int32{row[0][i], row[1][i]})
					}
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("scored %d (input, target) pairs, want each of the split's %d once in order; first few %v", len(got), len(want), got[:min(5, len(got))])
			}
		})
	}
}

// A capped pass takes whole global batches evenly spaced over the split.
func TestEvalLoaderCap(t *testing.T) {
	dir := t.TempDir()
	seqShard(t, filepath.Join(dir, "val_000000.bin"), 0, 121) // 40 windows of T = 3: 10 batches of B·N = 4
	opts := LoaderOptions{Shards: []string{filepath.Join(dir, "val_000000.bin")}, B: 2, T: 3, Vocab: 50257}
	for _, c := range []struct{ max, n int }{{3, 3}, {10, 10}, {50, 10}} {
		rows, batches := evalPass(t, opts, 2, c.max)
		if batches[0] != int64(c.n) || len(rows) != 4*c.n {
			t.Fatalf("cap %d: %d batches and %d rows, want %d and %d", c.max, batches[0], len(rows), c.n, 4*c.n)
		}
		for i := range c.n {
			g := i * 10 / c.n
			for j := range 4 {
				if first := rows[4*i+j][0][0]; first != int32(3*(4*g+j)) {
					t.Fatalf("cap %d: batch %d row %d starts at token %d, want %d (global batch %d)", c.max, i, j, first, 3*(4*g+j), g)
				}
			}
		}
	}
}

// The defect: ten validation rows with micro-batch 8 on two ranks were
// refused (fewer than one micro-step's B·N rows), and a larger split lost
// its rows past the last whole B·N. Every row must be served once, with
// its masked targets ignored, the second rank getting the two rows left.
func TestEvalLoaderRowsSmallerThanOneBatch(t *testing.T) {
	dir := t.TempDir()
	shard := filepath.Join(dir, "val_000000.bin")
	const T = 4
	var toks []int32
	var labels [][]bool
	var want [][2][]int32
	for j := range 10 {
		n := 1 + j%6 // lengths 1..6: the longest truncated to T+1 tokens
		lab := make([]bool, n)
		for i := range lab {
			lab[i] = i >= n/2 // the first half is a prompt
			toks = append(toks, int32(10*j+i))
		}
		labels = append(labels, lab)
		in, tg := make([]int32, T), make([]int32, T)
		for i := range T {
			in[i], tg[i] = 99, IgnoreTarget
			if i < min(n, T+1) {
				in[i] = int32(10*j + i)
			}
			if i+1 < min(n, T+1) && lab[i+1] {
				tg[i] = int32(10*j + i + 1)
			}
		}
		if slices.ContainsFunc(tg, func(x int32) bool { return x >= 0 }) {
			want = append(want, [2][]int32{in, tg})
		}
	}
	if err := WriteShard(shard, ShardGPT2, toks); err != nil {
		t.Fatal(err)
	}
	if err := WriteMask(MaskPath(shard), labels, 99); err != nil {
		t.Fatal(err)
	}
	opts := LoaderOptions{Shards: []string{shard}, B: 8, T: T, Vocab: 100}
	rows, batches := evalPass(t, opts, 2, 0)
	if batches[0] != 1 || batches[1] != 1 {
		t.Fatalf("batches per rank %v, want 1 each", batches)
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows with targets served, want %d", len(rows), len(want))
	}
	for i := range want {
		if !slices.Equal(rows[i][0], want[i][0]) || !slices.Equal(rows[i][1], want[i][1]) {
			t.Fatalf("row %d: inputs %v targets %v, want %v %v", i, rows[i][0], rows[i][1], want[i][0], want[i][1])
		}
	}
	// Training still needs one micro-step of rows on all ranks, and says how
	// to get there.
	o := opts
	o.WorldSize = 2
	_, err := NewLoader(o)
	for _, s := range []string{"10 rows", "8·2", "train_micro_batch_size_per_gpu", "number of ranks"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("training loader over 10 rows at B·N = 8·2: %v, want it to say %q", err, s)
		}
	}
}

// A split with nothing to score is refused, naming the fix.
func TestEvalLoaderEmptySplit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "val_000000.bin")
	seqShard(t, path, 0, 1)
	_, err := NewEvalLoader(LoaderOptions{Shards: []string{path}, B: 1, T: 4, WorldSize: 1, Vocab: 100}, 0)
	for _, s := range []string{path, "no sample to score", "without validation data"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("eval loader over one token: %v, want it to say %q", err, s)
		}
	}
	if _, err := NewEvalLoader(LoaderOptions{Shards: []string{path}, B: 1, T: 1, WorldSize: 1, Shuffle: true, Vocab: 100}, 1); err == nil {
		t.Fatal("a shuffled eval loader was accepted")
	}
}
