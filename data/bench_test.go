package data

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/data/hftok/hftoktest"
)

func BenchmarkLoaderB8T1024N2(b *testing.B) { loaderBench(b, 8, 1024, 2) }
func BenchmarkLoaderB4T64N1(b *testing.B)   { loaderBench(b, 4, 64, 1) }

// loaderBench reports rank 0's read rate over a 4M-token shard.
func loaderBench(b *testing.B, B, T, N int) {
	path := filepath.Join(b.TempDir(), "train_000000.bin")
	toks := make([]int32, 4<<20)
	for i := range toks {
		toks[i] = int32(i % 50257)
	}
	if err := WriteShard(path, ShardGPT2, toks); err != nil {
		b.Fatal(err)
	}
	l, err := NewLoader(LoaderOptions{Shards: []string{path}, B: B, T: T, Rank: 0, WorldSize: N, Vocab: 50257})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	in, tg := make([]int32, B*T), make([]int32, B*T)
	b.SetBytes(int64(2 * B * T))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := l.Next(in, tg); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*B*T)/b.Elapsed().Seconds(), "tokens/s")
}

// The Prepare benchmarks report MB/s of input text through tokenization and
// shard writing. The OneWorker ones tokenize on one goroutine, so their MB/s
// is per core; their 4 MB of input keeps the fixed cost of a run (writing
// the tokenizer's files, an 11 MB tokenizer.json for Qwen3) small beside it.
func BenchmarkPrepareGPT2Text1MB(b *testing.B) { prepareBench(b, gpt2(b), englishLike, 1<<20, 0) }
func BenchmarkPrepareByteText1MB(b *testing.B) {
	prepareBench(b, NewByteTokenizer(), englishLike, 1<<20, 0)
}
func BenchmarkPrepareGPT2Text4MBOneWorker(b *testing.B) {
	prepareBench(b, gpt2(b), englishLike, 4<<20, 1)
}
func BenchmarkPrepareQwen3Text4MBOneWorker(b *testing.B) {
	prepareBench(b, hfTok(b, "qwen3"), englishLike, 4<<20, 1)
}
func BenchmarkPrepareLlama3Text4MBOneWorker(b *testing.B) {
	prepareBench(b, hfTok(b, "llama3"), englishLike, 4<<20, 1)
}
func BenchmarkPrepareGPT2GoSource4MBOneWorker(b *testing.B) {
	prepareBench(b, gpt2(b), goSource, 4<<20, 1)
}
func BenchmarkPrepareQwen3GoSource4MBOneWorker(b *testing.B) {
	prepareBench(b, hfTok(b, "qwen3"), goSource, 4<<20, 1)
}

func gpt2(b *testing.B) Tokenizer {
	tok, err := NewGPT2Tokenizer()
	if err != nil {
		b.Fatal(err)
	}
	return tok
}

// hfTok loads a real Hugging Face tokenizer (skipped when the files are not
// fetched; see scripts/fetch-tokenizers.sh).
func hfTok(b *testing.B, name string) Tokenizer {
	tok, err := LoadHFTokenizer(hftoktest.Dir(b, name))
	if err != nil {
		b.Fatal(err)
	}
	return tok
}

// englishLike writes 64 documents of words drawn from a short English-like
// list, with digits, punctuation and a newline now and then: most words
// repeat, as in natural text.
func englishLike(b *testing.B, dir string, size int) {
	words := strings.Fields("the of and to in is was for that on with as by at from his her they this which " +
		"training model tokens gradient shard optimizer partition throughput, memory. (rank) 2024 alpha beta")
	r := rand.New(rand.NewPCG(9, 9))
	per := size / 64
	for d := range 64 {
		var sb strings.Builder
		for sb.Len() < per {
			sb.WriteString(words[r.IntN(len(words))])
			if r.IntN(12) == 0 {
				sb.WriteString("\n")
			} else {
				sb.WriteString(" ")
			}
		}
		writeFile(b, filepath.Join(dir, fmt.Sprintf("doc%02d.txt", d)), []byte(sb.String()))
	}
}

// goSource copies about size bytes of the Go distribution's own sources, in
// path order: code, comments and identifiers in their natural variety.
func goSource(b *testing.B, dir string, size int) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Skipf("go env GOROOT: %v", err)
	}
	root := filepath.Join(strings.TrimSpace(string(out)), "src", "net")
	n := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || n >= size {
			return err
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n += len(body)
		writeFile(b, filepath.Join(dir, fmt.Sprintf("f%04d.txt", n)), body)
		return nil
	})
	if err != nil || n < size/2 {
		b.Skipf("Go sources under %s: %d bytes, %v", root, n, err)
	}
}

// prepareBench prepares size bytes of the documents that gen writes; MB/s
// is input text per second, workers 0 means one per CPU.
func prepareBench(b *testing.B, tok Tokenizer, gen func(*testing.B, string, int), size, workers int) {
	in := b.TempDir()
	gen(b, in, size)
	out := b.TempDir()
	var sum PrepareSummary
	b.ResetTimer()
	for range b.N {
		var err error
		sum, err = Prepare(context.Background(), PrepareOptions{Inputs: []string{in}, Tokenizer: tok, OutputDir: out,
			ValFraction: 0.1, Force: true, Workers: workers})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(sum.InputBytes)
	b.ReportMetric(float64(int64(b.N)*(sum.Train.Tokens+sum.Val.Tokens))/b.Elapsed().Seconds(), "tokens/s")
}
