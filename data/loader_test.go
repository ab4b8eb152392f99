package data

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// seqShard writes a shard whose token at position p is base+p, so a token's
// value tells where it was read from.
func seqShard(t testing.TB, path string, base, n int) {
	t.Helper()
	toks := make([]uint32, n)
	for i := range toks {
		toks[i] = uint32(base + i)
	}
	writeFile(t, path, rawShard(t, 20240520, 1, int32(n), 2, toks))
}

// llmcPositions is llm.c's batching written out from its source's arithmetic
// (dataloader.h): shard_num_samples = (ntok·2 − 2) / (B·T·nproc·2) and rank r
// reads B·T+1 tokens at byte 1024 + idx·B·T·nproc·2 + r·B·T·2. It returns
// the token position of each sample's first input token.
func llmcPositions(ntok, B, T, nproc, rank int) []int {
	totalBatchBytes := B * T * nproc * 2
	numSamples := (ntok*2 - 2) / totalBatchBytes
	var out []int
	for idx := range numSamples {
		byteOff := 1024 + idx*totalBatchBytes + rank*B*T*2
		out = append(out, (byteOff-1024)/2)
	}
	return out
}

func expectBatch(t *testing.T, what string, inputs, targets []int32, start int) {
	t.Helper()
	for i := range inputs {
		if inputs[i] != int32(start+i) || targets[i] != int32(start+i+1) {
			t.Fatalf("%s: at %d got input %d target %d, want %d and %d",
				what, i, inputs[i], targets[i], start+i, start+i+1)
		}
	}
}

func TestLoaderOrderMatchesLLMC(t *testing.T) {
	dir := t.TempDir()
	// 960 is a multiple of every group size below except B·T·N = 37·3: the
	// last group would need one token past the end, so llm.c drops it.
	for _, K := range []int{1000, 960} {
		path := filepath.Join(dir, fmt.Sprintf("train_%d.bin", K))
		seqShard(t, path, 0, K)
		for _, nproc := range []int{1, 2, 3} {
			for _, bt := range [][2]int{{2, 8}, {4, 5}, {1, 37}} {
				B, T := bt[0], bt[1]
				for rank := range nproc {
					t.Run(fmt.Sprintf("K%d_N%d_B%dT%d_r%d", K, nproc, B, T, rank), func(t *testing.T) {
						l, err := NewLoader(LoaderOptions{Shards: []string{path}, B: B, T: T, Rank: rank, WorldSize: nproc, Vocab: 50257})
						if err != nil {
							t.Fatal(err)
						}
						defer l.Close()
						want := llmcPositions(K, B, T, nproc, rank)
						if l.BatchesPerEpoch() != int64(len(want)) {
							t.Fatalf("BatchesPerEpoch %d, llm.c has %d samples", l.BatchesPerEpoch(), len(want))
						}
						in, tg := make([]int32, B*T), make([]int32, B*T)
						// Two and a half epochs: the order repeats after the wrap.
						for step := range 5*len(want)/2 + 1 {
							if err := l.Next(in, tg); err != nil {
								t.Fatal(err)
							}
							expectBatch(t, fmt.Sprintf("step %d", step), in, tg, want[step%len(want)])
						}
						if st := l.Save(); st.Epoch != 2 {
							t.Fatalf("epoch %d after 2.5 passes, want 2", st.Epoch)
						}
					})
				}
			}
		}
	}
}

func TestLoaderRanksDisjoint(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	seqShard(t, path, 0, 500)
	const B, T, N = 2, 7, 3
	seen := map[int32]int{}
	for rank := range N {
		l, err := NewLoader(LoaderOptions{Shards: []string{path}, B: B, T: T, Rank: rank, WorldSize: N, Vocab: 50257})
		if err != nil {
			t.Fatal(err)
		}
		in, tg := make([]int32, B*T), make([]int32, B*T)
		for range l.BatchesPerEpoch() {
			if err := l.Next(in, tg); err != nil {
				t.Fatal(err)
			}
			for _, v := range in {
				seen[v]++
			}
		}
		l.Close()
	}
	groups := (500 - 1) / (B * T * N)
	if len(seen) != groups*B*T*N {
		t.Fatalf("ranks read %d distinct input tokens, want %d", len(seen), groups*B*T*N)
	}
	for v, n := range seen {
		if n != 1 || int(v) >= groups*B*T*N {
			t.Fatalf("token %d read %d times", v, n)
		}
	}
}

func TestLoaderMultiShardAndWrap(t *testing.T) {
	dir := t.TempDir()
	// Given out of order; read in lexical order. b is too small for a group.
	seqShard(t, filepath.Join(dir, "c.bin"), 20000, 70)
	seqShard(t, filepath.Join(dir, "a.bin"), 0, 50)
	seqShard(t, filepath.Join(dir, "b.bin"), 10000, 16)
	const B, T, N, r = 2, 4, 2, 1 // group = 16 tokens; b has 16 < 17
	l, err := NewLoader(LoaderOptions{Shards: []string{filepath.Join(dir, "c.bin"), filepath.Join(dir, "[ab].bin")}, B: B, T: T, Rank: r, WorldSize: N, Vocab: 50257})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.SkippedShards(); len(got) != 1 || filepath.Base(got[0]) != "b.bin" {
		t.Fatalf("skipped %v, want b.bin", got)
	}
	var want []int
	for _, s := range []struct{ base, n int }{{0, 50}, {20000, 70}} {
		for _, p := range llmcPositions(s.n, B, T, N, r) {
			want = append(want, s.base+p)
		}
	}
	in, tg := make([]int32, B*T), make([]int32, B*T)
	for step := range 3 * len(want) {
		if err := l.Next(in, tg); err != nil {
			t.Fatal(err)
		}
		expectBatch(t, fmt.Sprintf("step %d", step), in, tg, want[step%len(want)])
		if st := l.Save(); st.Epoch != int64((step+1)/len(want)) {
			t.Fatalf("step %d: epoch %d", step, st.Epoch)
		}
	}
}

func TestLoaderTooSmall(t *testing.T) {
	dir := t.TempDir()
	seqShard(t, filepath.Join(dir, "a.bin"), 0, 30)
	seqShard(t, filepath.Join(dir, "b.bin"), 0, 40)
	_, err := NewLoader(LoaderOptions{Shards: []string{filepath.Join(dir, "*.bin")}, B: 4, T: 8, Rank: 0, WorldSize: 2, Vocab: 50257})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"N·B·T+1 = 65", "b.bin", "has 40"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	_, err = NewLoader(LoaderOptions{Shards: []string{filepath.Join(dir, "nothing_*.bin")}, B: 1, T: 1, WorldSize: 1, Vocab: 50257})
	if err == nil || !strings.Contains(err.Error(), "nothing_*.bin") {
		t.Fatalf("glob matching nothing: %v", err)
	}
}

func TestLoaderSaveRestore(t *testing.T) {
	dir := t.TempDir()
	for i := range 3 {
		seqShard(t, filepath.Join(dir, fmt.Sprintf("train_%06d.bin", i)), 10000*i, 90+20*i)
	}
	for _, shuffle := range []bool{false, true} {
		t.Run(fmt.Sprintf("shuffle=%v", shuffle), func(t *testing.T) {
			opts := LoaderOptions{Shards: []string{filepath.Join(dir, "train_*.bin")}, B: 2, T: 3, Rank: 1, WorldSize: 2, Shuffle: shuffle, Seed: 7, Vocab: 50257}
			a, err := NewLoader(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			in, tg := make([]int32, 6), make([]int32, 6)
			for range 37 {
				if err := a.Next(in, tg); err != nil {
					t.Fatal(err)
				}
			}
			blob, err := json.Marshal(a.Save())
			if err != nil {
				t.Fatal(err)
			}
			var want [][]int32
			for range 60 {
				if err := a.Next(in, tg); err != nil {
					t.Fatal(err)
				}
				want = append(want, append([]int32(nil), in...))
			}
			b, err := NewLoader(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			var st LoaderState
			if err := json.Unmarshal(blob, &st); err != nil {
				t.Fatal(err)
			}
			if err := b.Restore(st); err != nil {
				t.Fatal(err)
			}
			for i, w := range want {
				if err := b.Next(in, tg); err != nil {
					t.Fatal(err)
				}
				if !slicesEqual(in, w) {
					t.Fatalf("batch %d after restore: %v, want %v", i, in, w)
				}
			}
			other := opts
			other.B = 3
			c, err := NewLoader(other)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Restore(st); err == nil || !strings.Contains(err.Error(), "B·T·N") {
				t.Fatalf("restore with another geometry: %v", err)
			}
			bad := st
			bad.Shard = 99
			if err := b.Restore(bad); err == nil {
				t.Fatal("out-of-range shard accepted")
			}
		})
	}
}

func TestLoaderShuffle(t *testing.T) {
	dir := t.TempDir()
	const B, T, N = 1, 4, 2
	var ntoks = []int{81, 121, 161}
	for i, n := range ntoks {
		seqShard(t, filepath.Join(dir, fmt.Sprintf("s%d.bin", i)), 20000*i, n)
	}
	// Every chunk a rank may read in one epoch, as llm.c positions.
	valid := map[int32]bool{}
	total := 0
	for i, n := range ntoks {
		for _, p := range llmcPositions(n, B, T, N, 0) {
			valid[int32(20000*i+p)] = true
			total++
		}
	}
	read := func(rank int, seed uint64, epochs int) []int32 {
		l, err := NewLoader(LoaderOptions{Shards: []string{filepath.Join(dir, "s*.bin")}, B: B, T: T, Rank: rank, WorldSize: N, Shuffle: true, Seed: seed, Vocab: 50257})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		in, tg := make([]int32, B*T), make([]int32, B*T)
		var firsts []int32
		for range epochs * total {
			if err := l.Next(in, tg); err != nil {
				t.Fatal(err)
			}
			for i := range in {
				if in[i] != in[0]+int32(i) || tg[i] != in[i]+1 {
					t.Fatalf("batch %v / %v is not consecutive tokens", in, tg)
				}
			}
			firsts = append(firsts, in[0])
		}
		return firsts
	}
	r0 := read(0, 5, 2)
	r1 := read(1, 5, 2)
	for e := range 2 {
		seen := map[int32]bool{}
		for i, v := range r0[e*total : (e+1)*total] {
			if !valid[v] || seen[v] {
				t.Fatalf("epoch %d: chunk at %d read twice or invalid", e, v)
			}
			seen[v] = true
			// Ranks share the permutation, so rank 1 reads the next chunk
			// of the same group.
			if r1[e*total+i] != v+B*T {
				t.Fatalf("epoch %d batch %d: rank 1 read %d, rank 0 read %d", e, i, r1[e*total+i], v)
			}
		}
		if len(seen) != total {
			t.Fatalf("epoch %d covered %d of %d chunks", e, len(seen), total)
		}
	}
	if slicesEqual(r0[:total], r0[total:]) {
		t.Fatal("the second epoch repeats the first epoch's order")
	}
	sorted := true
	for i := 1; i < total; i++ {
		sorted = sorted && r0[i] > r0[i-1]
	}
	if sorted {
		t.Fatal("shuffled order is the sequential order")
	}
	if !slicesEqual(r0, read(0, 5, 2)) {
		t.Fatal("same seed, different order")
	}
	if slicesEqual(r0, read(0, 6, 2)) {
		t.Fatal("different seeds, same order")
	}
}

func TestLoaderLlama3Shard(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.bin")
	toks := make([]uint32, 100)
	for i := range toks {
		toks[i] = uint32(100000 + i)
	}
	writeFile(t, path, rawShard(t, 20240801, 7, 100, 4, toks))
	l, err := NewLoader(LoaderOptions{Shards: []string{path}, B: 2, T: 5, Rank: 1, WorldSize: 3, Vocab: 128256})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	in, tg := make([]int32, 10), make([]int32, 10)
	for _, p := range llmcPositions(100, 2, 5, 3, 1) {
		if err := l.Next(in, tg); err != nil {
			t.Fatal(err)
		}
		expectBatch(t, "llama3", in, tg, 100000+p)
	}
}

func TestLoaderOptionErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.bin")
	seqShard(t, path, 0, 100)
	for _, o := range []LoaderOptions{
		{Shards: []string{path}, B: 0, T: 4, WorldSize: 1, Vocab: 50257},
		{Shards: []string{path}, B: 1, T: 4, WorldSize: 0, Vocab: 50257},
		{Shards: []string{path}, B: 1, T: 4, Rank: 2, WorldSize: 2, Vocab: 50257},
		{Shards: nil, B: 1, T: 4, WorldSize: 1, Vocab: 50257},
		{Shards: []string{filepath.Dir(path)}, B: 1, T: 4, WorldSize: 1, Vocab: 50257},
		{Shards: []string{path}, B: 1, T: 4, WorldSize: 1},
		{Shards: []string{path}, B: 1, T: 4, WorldSize: 1, Vocab: -5},
	} {
		if _, err := NewLoader(o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}
