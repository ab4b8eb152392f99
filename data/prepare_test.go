package data

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPrepareHelloWorld(t *testing.T) {
	in := t.TempDir()
	out := filepath.Join(t.TempDir(), "data")
	writeFile(t, filepath.Join(in, "hello.txt"), []byte("Hello world"))
	tok, err := NewTokenizer("gpt2")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := Prepare(context.Background(), PrepareOptions{Inputs: []string{in}, Tokenizer: tok, OutputDir: out, ValFraction: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "train_000000.bin"))
	if err != nil {
		t.Fatal(err)
	}
	var hdr [256]int32
	if err := binary.Read(bytes.NewReader(raw), binary.LittleEndian, &hdr); err != nil {
		t.Fatal(err)
	}
	if hdr[0] != 20240520 || hdr[1] != 1 || hdr[2] != 3 || len(raw) != 1024+2*3 {
		t.Fatalf("header %v, size %d", hdr[:3], len(raw))
	}
	var toks [3]uint16
	if err := binary.Read(bytes.NewReader(raw[1024:]), binary.LittleEndian, &toks); err != nil {
		t.Fatal(err)
	}
	if toks != [3]uint16{50256, 15496, 995} {
		t.Fatalf("tokens %v, want [50256 15496 995]", toks)
	}
	// One document: nothing for val, so no val shard.
	if _, err := os.Stat(filepath.Join(out, "val_000000.bin")); !os.IsNotExist(err) {
		t.Fatalf("val shard for a single document: %v", err)
	}
	var info map[string]any
	b, err := os.ReadFile(filepath.Join(out, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	if info["tokenizer"] != "gpt2" || info["eot"] != 50256.0 || info["vocab_size"] != 50257.0 {
		t.Fatalf("tokenizer.json = %s", b)
	}
	if sum.Train.Documents != 1 || sum.Train.Tokens != 3 || len(sum.Train.Shards) != 1 || sum.Val.Documents != 0 {
		t.Fatalf("summary %+v", sum)
	}
}

// byteCorpus writes n documents, 5 per .txt plus 3 lines per .jsonl in turn,
// and returns their texts in sorted-path order.
func byteCorpus(t *testing.T, dir string, files int) []string {
	t.Helper()
	var docs []string
	for i := range files {
		name := filepath.Join(dir, fmt.Sprintf("doc%03d", i))
		if i%2 == 0 {
			text := fmt.Sprintf("text file %d: %s", i, strings.Repeat("ab", i))
			writeFile(t, name+".txt", []byte(text))
			docs = append(docs, text)
			continue
		}
		var buf bytes.Buffer
		for j := range 3 {
			text := fmt.Sprintf("line %d of %d \"quoted\" é", j, i)
			line, _ := json.Marshal(map[string]string{"body": text})
			buf.Write(line)
			buf.WriteByte('\n')
			docs = append(docs, text)
		}
		writeFile(t, name+".jsonl", buf.Bytes())
	}
	return docs
}

func readSplit(t *testing.T, shards []string) []int32 {
	t.Helper()
	var all []int32
	for _, s := range shards {
		_, toks, err := ReadShard(s)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, toks...)
	}
	return all
}

func TestPrepareSplitsAndShards(t *testing.T) {
	in := t.TempDir()
	docs := byteCorpus(t, in, 9)
	// The expected streams, built from the documented rule: EOT then bytes,
	// document 0 to train, then val each time i·F crosses an integer.
	var wantTrain, wantVal []int32
	var trainDocs, valDocs int64
	const F = 0.25
	for i, d := range docs {
		toks := []int32{256}
		for _, c := range []byte(d) {
			toks = append(toks, int32(c))
		}
		isVal := i >= 1 && int(float64(i)*F+0.999999) > int(float64(i-1)*F+0.999999)
		if isVal {
			wantVal = append(wantVal, toks...)
			valDocs++
		} else {
			wantTrain = append(wantTrain, toks...)
			trainDocs++
		}
	}
	var first []string
	for _, workers := range []int{1, 3} {
		out := filepath.Join(t.TempDir(), "out")
		sum, err := Prepare(context.Background(), PrepareOptions{
			Inputs: []string{in}, Tokenizer: NewByteTokenizer(), OutputDir: out,
			ValFraction: F, ShardTokens: 50, TextField: "body", Workers: workers,
		})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Train.Documents != trainDocs || sum.Val.Documents != valDocs {
			t.Fatalf("documents train %d val %d, want %d and %d", sum.Train.Documents, sum.Val.Documents, trainDocs, valDocs)
		}
		if got := readSplit(t, sum.Train.Shards); !slicesEqual(got, wantTrain) {
			t.Fatalf("workers %d: train tokens differ", workers)
		}
		if got := readSplit(t, sum.Val.Shards); !slicesEqual(got, wantVal) {
			t.Fatalf("workers %d: val tokens differ", workers)
		}
		if sum.Train.Tokens != int64(len(wantTrain)) || sum.Val.Tokens != int64(len(wantVal)) {
			t.Fatalf("token counts %d/%d", sum.Train.Tokens, sum.Val.Tokens)
		}
		for _, split := range [][]string{sum.Train.Shards, sum.Val.Shards} {
			for i, s := range split {
				if want := fmt.Sprintf("_%06d.bin", i); !strings.HasSuffix(s, want) {
					t.Fatalf("shard %d named %s", i, s)
				}
				h, err := ReadShardHeader(s)
				if err != nil {
					t.Fatal(err)
				}
				if h.NumTokens > 50 || (i < len(split)-1 && h.NumTokens != 50) {
					t.Fatalf("shard %s holds %d tokens with a cap of 50", s, h.NumTokens)
				}
			}
		}
		var contents []string
		for _, s := range append(sum.Train.Shards, sum.Val.Shards...) {
			b, _ := os.ReadFile(s)
			contents = append(contents, string(b))
		}
		if first == nil {
			first = contents
		} else if strings.Join(first, "|") != strings.Join(contents, "|") {
			t.Fatal("output depends on the number of workers")
		}
	}
}

func TestPrepareJSONLMaxDocs(t *testing.T) {
	in := t.TempDir()
	var lines []string
	for i := range 10 {
		lines = append(lines, fmt.Sprintf(`{"text": "doc %d", "meta": {"n": %d}}`, i, i))
	}
	p := writeFile(t, filepath.Join(in, "docs.jsonl"), []byte(strings.Join(lines, "\n")+"\n"))
	out := t.TempDir()
	sum, err := Prepare(context.Background(), PrepareOptions{Inputs: []string{p}, Tokenizer: NewByteTokenizer(), OutputDir: out, MaxDocs: 4})
	if err != nil {
		t.Fatal(err)
	}
	var want []int32
	for i := range 4 {
		want = append(want, 256)
		for _, c := range []byte(fmt.Sprintf("doc %d", i)) {
			want = append(want, int32(c))
		}
	}
	if got := readSplit(t, sum.Train.Shards); !slicesEqual(got, want) {
		t.Fatalf("tokens %v, want %v", got, want)
	}
	if sum.Val.Documents != 0 || len(sum.Val.Shards) != 0 {
		t.Fatalf("val with fraction 0: %+v", sum.Val)
	}
}

func TestPrepareRefusesOverwrite(t *testing.T) {
	in := t.TempDir()
	byteCorpus(t, in, 6)
	out := t.TempDir()
	opts := PrepareOptions{Inputs: []string{in}, Tokenizer: NewByteTokenizer(), OutputDir: out, ShardTokens: 20, ValFraction: 0.1, TextField: "body"}
	first, err := Prepare(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	firstTrain := readSplit(t, first.Train.Shards)
	_, err = Prepare(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), out) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("second run without force: %v", err)
	}
	// With force and bigger shards, the surplus old shards must go.
	opts.Force = true
	opts.ShardTokens = 1000
	second, err := Prepare(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := filepath.Glob(filepath.Join(out, "*.bin"))
	if len(first.Train.Shards) < 2 || len(m) != len(second.Train.Shards)+len(second.Val.Shards) {
		t.Fatalf("after --force: %d shard files, summary says %d+%d", len(m), len(second.Train.Shards), len(second.Val.Shards))
	}
	if got := readSplit(t, second.Train.Shards); !slicesEqual(got, firstTrain) {
		t.Fatal("forced rerun wrote other train tokens")
	}
}

// wideTokenizer emits an id that does not fit uint16 for the letter z.
type wideTokenizer struct{ ByteTokenizer }

func (wideTokenizer) Encode(text string) []int {
	ids := ByteTokenizer{}.Encode(text)
	for i, c := range ids {
		if c == 'z' {
			ids[i] = 70000
		}
	}
	return ids
}

func TestPrepareErrors(t *testing.T) {
	in := t.TempDir()
	writeFile(t, filepath.Join(in, "a.txt"), []byte(strings.Repeat("abc ", 5000)))
	bad := writeFile(t, filepath.Join(in, "b.jsonl"), []byte("{\"text\": \"fine\"}\n{\"text\": oops}\n{\"title\": \"x\"}\n"))
	writeFile(t, filepath.Join(in, "c.txt"), []byte("has a z"))
	ctx := context.Background()

	out := t.TempDir()
	_, err := Prepare(ctx, PrepareOptions{Inputs: []string{in}, Tokenizer: NewByteTokenizer(), OutputDir: out, ShardTokens: 1000})
	if err == nil || !strings.Contains(err.Error(), bad+":2") {
		t.Fatalf("bad JSONL line: %v", err)
	}
	if m, _ := os.ReadDir(out); len(m) != 0 {
		t.Fatalf("a failed prepare left %d files", len(m))
	}

	sum, err := Prepare(ctx, PrepareOptions{Inputs: []string{in}, Tokenizer: NewByteTokenizer(), OutputDir: out, SkipBadLines: true})
	if err != nil || sum.SkippedLines != 2 || sum.Train.Documents != 3 {
		t.Fatalf("skipping bad lines: %+v %v", sum, err)
	}

	out = t.TempDir()
	_, err = Prepare(ctx, PrepareOptions{Inputs: []string{in}, Tokenizer: wideTokenizer{}, OutputDir: out, SkipBadLines: true, ShardTokens: 1000})
	if err == nil || !strings.Contains(err.Error(), "70000") || !strings.Contains(err.Error(), "c.txt") {
		t.Fatalf("token id ≥ 65536: %v", err)
	}
	if m, _ := os.ReadDir(out); len(m) != 0 {
		t.Fatalf("a failed prepare left %d files", len(m))
	}

	for _, tc := range []struct {
		opts PrepareOptions
		want string
	}{
		{PrepareOptions{Inputs: []string{filepath.Join(in, "*.none")}}, "matches no files"},
		{PrepareOptions{Inputs: []string{filepath.Join(in, "missing")}}, "missing"},
		{PrepareOptions{Inputs: []string{in}, ValFraction: 1}, "val fraction"},
		{PrepareOptions{Inputs: []string{in}, ShardTokens: -3}, "shard tokens"},
	} {
		tc.opts.Tokenizer = NewByteTokenizer()
		tc.opts.OutputDir = t.TempDir()
		if _, err := Prepare(ctx, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.opts, err, tc.want)
		}
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Prepare(cctx, PrepareOptions{Inputs: []string{in}, Tokenizer: NewByteTokenizer(), OutputDir: t.TempDir(), SkipBadLines: true}); err == nil {
		t.Fatal("a cancelled prepare succeeded")
	}
}
