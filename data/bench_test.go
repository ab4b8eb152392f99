package data

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
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

func BenchmarkPrepareGPT2Text1MB(b *testing.B) {
	tok, err := NewGPT2Tokenizer()
	if err != nil {
		b.Fatal(err)
	}
	prepareBench(b, tok, 1<<20)
}

func BenchmarkPrepareByteText1MB(b *testing.B) { prepareBench(b, NewByteTokenizer(), 1<<20) }

// prepareBench tokenizes generated English-like text split over 64 .txt
// documents; MB/s is input text per second.
func prepareBench(b *testing.B, tok Tokenizer, size int) {
	in := b.TempDir()
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
		writeFile(b, filepath.Join(in, fmt.Sprintf("doc%02d.txt", d)), []byte(sb.String()))
	}
	out := b.TempDir()
	var sum PrepareSummary
	b.ResetTimer()
	for range b.N {
		var err error
		sum, err = Prepare(context.Background(), PrepareOptions{Inputs: []string{in}, Tokenizer: tok, OutputDir: out, ValFraction: 0.1, Force: true})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(sum.InputBytes)
	b.ReportMetric(float64(int64(b.N)*(sum.Train.Tokens+sum.Val.Tokens))/b.Elapsed().Seconds(), "tokens/s")
}
