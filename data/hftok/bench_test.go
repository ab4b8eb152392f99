package hftok

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/data/hftok/hftoktest"
)

func BenchmarkLoadQwen3(b *testing.B)  { loadBench(b, "qwen3") }
func BenchmarkLoadLlama3(b *testing.B) { loadBench(b, "llama3") }

// loadBench reports the time to parse and index a real tokenizer.json.
func loadBench(b *testing.B, name string) {
	dir := hftoktest.Dir(b, name)
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(tj)))
	for b.Loop() {
		if _, err := Load(tj, Config{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeQwen3Text1MB(b *testing.B)  { encodeBench(b, "qwen3", 1<<20) }
func BenchmarkEncodeLlama3Text1MB(b *testing.B) { encodeBench(b, "llama3", 1<<20) }

// encodeBench encodes English-like text on one goroutine: MB/s per core.
// The word cache is warm after the first iteration, as it is after the
// first documents of a corpus.
func encodeBench(b *testing.B, name string, size int) {
	dir := hftoktest.Dir(b, name)
	tok, err := loadDir(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	text := benchText(size)
	b.SetBytes(int64(len(text)))
	n := 0
	for b.Loop() {
		n = len(tok.Encode(text, EncodeOptions{}))
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// benchText is words drawn from a small English-like list plus digits and
// punctuation, with a newline now and then.
func benchText(size int) string {
	words := strings.Fields("the of and to in is was for that on with as by at from his her they this which " +
		"training model tokens gradient shard optimizer partition throughput, memory. (rank) 2024 alpha beta")
	r := rand.New(rand.NewPCG(9, 9))
	var sb strings.Builder
	for sb.Len() < size {
		sb.WriteString(words[r.IntN(len(words))])
		if r.IntN(12) == 0 {
			sb.WriteString("\n")
		} else {
			sb.WriteString(" ")
		}
	}
	return sb.String()
}
