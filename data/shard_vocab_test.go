package data

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// vocabShards writes the same tokens twice: once as llm.c writes shards
// (words 3-255 zero, so the loader must scan) and once through ShardWriter
// (which records the largest id in the header).
func vocabShards(t *testing.T, dir string, toks []int32) (llmc, ours string) {
	t.Helper()
	raw := make([]uint32, len(toks))
	for i, v := range toks {
		raw[i] = uint32(v)
	}
	llmc = writeFile(t, filepath.Join(dir, "llmc_000000.bin"), rawShard(t, 20240520, 1, int32(len(toks)), 2, raw))
	ours = filepath.Join(dir, "ours_000000.bin")
	if err := WriteShard(ours, ShardGPT2, toks); err != nil {
		t.Fatal(err)
	}
	return llmc, ours
}

// The defect: a token id ≥ the model's vocabulary deep in a shard was found
// only when training reached the batch holding it (step 68 of a real run),
// without the file or the offset. The loader must refuse it when built,
// naming both, whether the header records the largest id or not, for the
// train loader and the eval loader alike.
func TestOutOfVocabTokenDeepInShardFailsAtLoaderConstruction(t *testing.T) {
	const V, bad = 300, 9001
	toks := make([]int32, 20000)
	for i := range toks {
		toks[i] = int32(i % V)
	}
	toks[bad] = 4242
	dir := t.TempDir()
	llmc, ours := vocabShards(t, dir, toks)
	for _, path := range []string{llmc, ours} {
		opts := LoaderOptions{Shards: []string{path}, B: 4, T: 16, WorldSize: 2, Rank: 1, Vocab: V}
		_, err := NewLoader(opts)
		wantErr(t, err, path, "token id 4242", fmt.Sprintf("token offset %d", bad), fmt.Sprintf("byte %d", 1024+2*bad), "[0, 300)")
		_, err = NewEvalLoader(opts, 1)
		wantErr(t, err, path, "token id 4242", fmt.Sprintf("token offset %d", bad))
	}
	// The same shards are fine for a model with a larger vocabulary.
	for _, path := range []string{llmc, ours} {
		l, err := NewLoader(LoaderOptions{Shards: []string{path}, B: 4, T: 16, WorldSize: 1, Vocab: 4243})
		if err != nil {
			t.Fatalf("%s with V=4243: %v", path, err)
		}
		l.Close()
	}
}

// A uint32 (Llama-3) shard's ids are checked the same way, including ids
// that do not even fit int32.
func TestOutOfVocabTokenInLlama3Shard(t *testing.T) {
	toks := make([]uint32, 500)
	for i := range toks {
		toks[i] = uint32(i)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		id  uint32
		say string
	}{{128256, "token id 128256"}, {math.MaxUint32, fmt.Sprintf("token id %d", uint32(math.MaxUint32))}} {
		toks[321] = tc.id
		path := writeFile(t, filepath.Join(dir, "l.bin"), rawShard(t, 20240801, 7, int32(len(toks)), 4, toks))
		_, err := NewLoader(LoaderOptions{Shards: []string{path}, B: 2, T: 8, WorldSize: 1, Vocab: 128256})
		wantErr(t, err, path, tc.say, "token offset 321", fmt.Sprintf("byte %d", 1024+4*321))
	}
}

// A header whose max-token record does not match its token count (another
// tool changed the count) is not trusted: the tokens are scanned.
func TestStaleMaxTokenRecordIsScanned(t *testing.T) {
	dir := t.TempDir()
	toks := make([]int32, 1000)
	path := filepath.Join(dir, "s.bin")
	if err := WriteShard(path, ShardGPT2, toks); err != nil {
		t.Fatal(err)
	}
	h, err := ReadShardHeader(path)
	if err != nil || !h.HasMaxToken || h.MaxToken != 0 {
		t.Fatalf("header %+v %v: want a recorded largest id 0", h, err)
	}
	// Append a bad token and bump the count, leaving the old record.
	b, _ := os.ReadFile(path)
	b = binary.LittleEndian.AppendUint16(b, 777)
	binary.LittleEndian.PutUint32(b[8:], 1001)
	writeFile(t, path, b)
	if h, err := ReadShardHeader(path); err != nil || h.HasMaxToken {
		t.Fatalf("stale record trusted: %+v %v", h, err)
	}
	_, err = NewLoader(LoaderOptions{Shards: []string{path}, B: 1, T: 8, WorldSize: 1, Vocab: 500})
	wantErr(t, err, path, "token id 777", "token offset 1000")
}

// The per-batch check still names file and offset when a header lies about
// its largest id (a hostile or hand-edited file), instead of handing the
// model an id it would reject without either.
func TestLyingMaxTokenRecordCaughtAtRead(t *testing.T) {
	dir := t.TempDir()
	toks := make([]int32, 100)
	toks[50] = 999
	path := filepath.Join(dir, "s.bin")
	if err := WriteShard(path, ShardGPT2, toks); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	binary.LittleEndian.PutUint32(b[4*shardWordMaxToken:], 3)
	writeFile(t, path, b)
	l, err := NewLoader(LoaderOptions{Shards: []string{path}, B: 1, T: 32, WorldSize: 1, Vocab: 10})
	if err != nil {
		t.Fatal(err) // the record is trusted: that is the fast path
	}
	defer l.Close()
	in, tg := make([]int32, 32), make([]int32, 32)
	for range 3 {
		if err = l.Next(in, tg); err != nil {
			break
		}
	}
	wantErr(t, err, path, "token id 999", "token offset 50", "header misstates")
}

func wantErr(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one saying %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// BenchmarkShardVocabScan100MB measures the one-time scan of a shard
// without a max-token record (llm.c's): 50M uint16 tokens, a fineweb-sized
// shard of 100 MB. MB/s is shard bytes checked per second.
func BenchmarkShardVocabScan100MB(b *testing.B) {
	const n = 50_000_000
	raw := make([]byte, ShardHeaderBytes+2*n)
	binary.LittleEndian.PutUint32(raw, magicGPT2Shard)
	binary.LittleEndian.PutUint32(raw[4:], 1)
	binary.LittleEndian.PutUint32(raw[8:], n)
	for i := range n {
		binary.LittleEndian.PutUint16(raw[ShardHeaderBytes+2*i:], uint16(i%50257))
	}
	path := filepath.Join(b.TempDir(), "fineweb_train_000001.bin")
	writeFile(b, path, raw)
	b.SetBytes(int64(len(raw)))
	b.ResetTimer()
	for range b.N {
		h, err := openAndCheckShard(path, 50257)
		if err != nil || h.HasMaxToken {
			b.Fatal(h, err)
		}
	}
}
