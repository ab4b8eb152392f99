package data

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestMaskRoundTripAndGlobs(t *testing.T) {
	dir := t.TempDir()
	shard := filepath.Join(dir, "train_000000.bin")
	if err := WriteShard(shard, ShardGPT2, []int32{5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}); err != nil {
		t.Fatal(err)
	}
	rows := [][]bool{{false, false, true}, {true}, {false, true, true, true, false, true, true}}
	mp := MaskPath(shard)
	if filepath.Base(mp) != "train_000000.mask" {
		t.Fatalf("companion name %s", mp)
	}
	if err := WriteMask(mp, rows, 3); err != nil {
		t.Fatal(err)
	}
	h, starts, labels, err := ReadMask(mp, 11)
	if err != nil {
		t.Fatal(err)
	}
	if h.NumRows != 3 || h.PadID != 3 || !slices.Equal(starts, []uint32{0, 3, 4, 11}) || !slices.Equal(labels, slices.Concat(rows...)) {
		t.Fatalf("read back %+v %v %v", h, starts, labels)
	}
	if _, _, _, err := ReadMask(mp, 12); err == nil {
		t.Fatal("a companion of another token count accepted")
	}
	got, err := ResolveShards([]string{filepath.Join(dir, "train_*.bin")})
	if err != nil || !slices.Equal(got, []string{shard}) {
		t.Fatalf("glob matched %v (%v)", got, err)
	}
	b, _ := os.ReadFile(mp)
	for _, cut := range []int{0, 100, len(b) - 1} {
		if _, _, _, err := ParseMask("m", b[:cut]); err == nil {
			t.Errorf("truncated to %d bytes accepted", cut)
		}
	}
}

// TestRowLoader: one row per sample, its first T+1 tokens, padded, with
// unlabelled targets ignored; rank r takes rows r·B…r·B+B−1 of each group;
// a position saved on two ranks resumes on one.
func TestRowLoader(t *testing.T) {
	dir := t.TempDir()
	shard := filepath.Join(dir, "train_000000.bin")
	// rows: [10 11 12 13 14 15] (prompt 2), [20 21], [30 31 32], [40]
	if err := WriteShard(shard, ShardGPT2, []int32{10, 11, 12, 13, 14, 15, 20, 21, 30, 31, 32, 40}); err != nil {
		t.Fatal(err)
	}
	rows := [][]bool{{false, false, true, true, true, true}, {true, true}, {false, true, true}, {true}}
	if err := WriteMask(MaskPath(shard), rows, 99); err != nil {
		t.Fatal(err)
	}
	const T = 4
	l, err := NewLoader(LoaderOptions{Shards: []string{shard}, B: 1, T: T, Rank: 1, WorldSize: 2, Vocab: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !l.Masked() || l.BatchesPerEpoch() != 2 {
		t.Fatalf("masked %v, %d batches per epoch", l.Masked(), l.BatchesPerEpoch())
	}
	in, tg := make([]int32, T), make([]int32, T)
	if err := l.Next(in, tg); err != nil {
		t.Fatal(err)
	}
	// Rank 1 of group 0 is row 1: [20 21] padded.
	if !slices.Equal(in, []int32{20, 21, 99, 99}) || !slices.Equal(tg, []int32{21, -100, -100, -100}) {
		t.Fatalf("row 1: inputs %v targets %v", in, tg)
	}
	st := l.Save()
	one, err := NewLoader(LoaderOptions{Shards: []string{shard}, B: 1, T: T, Rank: 0, WorldSize: 1, Vocab: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if err := one.Next(in, tg); err != nil {
		t.Fatal(err)
	}
	// Row 0 truncated to T+1 = 5 tokens, its prompt's targets ignored.
	if !slices.Equal(in, []int32{10, 11, 12, 13}) || !slices.Equal(tg, []int32{-100, 12, 13, 14}) {
		t.Fatalf("row 0: inputs %v targets %v", in, tg)
	}
	if err := one.Restore(st); err != nil {
		t.Fatal(err)
	}
	if err := one.Next(in, tg); err != nil {
		t.Fatal(err)
	}
	// Two ranks used 2 rows; one rank continues at row 2.
	if !slices.Equal(in, []int32{30, 31, 32, 99}) || !slices.Equal(tg, []int32{31, 32, -100, -100}) {
		t.Fatalf("resumed row 2: inputs %v targets %v", in, tg)
	}

	// Packed: the same shard as a stream, unlabelled targets ignored.
	p, err := NewLoader(LoaderOptions{Shards: []string{shard}, B: 1, T: 6, Rank: 0, WorldSize: 1, Vocab: 100, Pack: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	in, tg = make([]int32, 6), make([]int32, 6)
	if err := p.Next(in, tg); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(in, []int32{10, 11, 12, 13, 14, 15}) || !slices.Equal(tg, []int32{-100, 12, 13, 14, 15, 20}) {
		t.Fatalf("packed: inputs %v targets %v", in, tg)
	}
}

func FuzzParseMask(f *testing.F) {
	var b maskBuilder
	b.add([]bool{true, false, true})
	b.add([]bool{false, false, false, false, false, false, true, true, true})
	f.Add(b.encode(0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, starts, labels, err := ParseMask("fuzz", data)
		if err != nil {
			return
		}
		if int64(len(labels)) != h.NumTokens || int64(len(starts)) != h.NumRows+1 || int64(starts[len(starts)-1]) != h.NumTokens {
			t.Fatalf("accepted an inconsistent companion: %+v, %d starts, %d labels", h, len(starts), len(labels))
		}
	})
}
