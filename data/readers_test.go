package data

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/gotrain/gotrain/data/hftok/hftoktest"
)

type pqMessage struct {
	Role    string `parquet:"role" json:"role"`
	Content string `parquet:"content" json:"content"`
}

type pqRow struct {
	Prompt     string      `parquet:"prompt"`
	Completion string      `parquet:"completion"`
	Messages   []pqMessage `parquet:"messages,list"`
}

// TestRecordFilesGiveSameShards: the same rows as JSON Lines, a JSON
// array, .json.gz, .jsonl.gz and Parquet prepare into byte-identical
// shards and loss-mask companions. The Parquet file is written by
// parquet-go's typed writer and read back through its generic row reader
// (map[string]any), a second path through the library; its schema is
// checked through the file's footer.
func TestRecordFilesGiveSameShards(t *testing.T) {
	rows := []pqRow{
		{Prompt: "Q: two plus two?\nA:", Completion: " four"},
		{Messages: []pqMessage{{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}}},
		{Prompt: "Translate: chat", Completion: " cat ✓"},
	}
	// Messages rows need a chat template: with the real Qwen3 tokenizer
	// when it is there, else the conversation row is left out and the
	// byte tokenizer prepares the prompt/completion rows.
	var tok Tokenizer = NewByteTokenizer()
	if qt, err := LoadHFTokenizer(filepath.Join(hftoktest.Cache(), "qwen3")); err == nil {
		tok = qt
	} else {
		rows = []pqRow{rows[0], rows[2]}
	}
	// The JSON form: each row has only its own form's fields.
	var recs []map[string]any
	for _, r := range rows {
		if r.Messages != nil {
			recs = append(recs, map[string]any{"messages": r.Messages})
		} else {
			recs = append(recs, map[string]any{"prompt": r.Prompt, "completion": r.Completion})
		}
	}
	var jl bytes.Buffer
	for _, r := range recs {
		b, _ := json.Marshal(r)
		jl.Write(b)
		jl.WriteByte('\n')
	}
	arr, _ := json.MarshalIndent(recs, "", "  ")
	gz := func(b []byte) []byte {
		var out bytes.Buffer
		w := gzip.NewWriter(&out)
		w.Write(b)
		w.Close()
		return out.Bytes()
	}
	var pq bytes.Buffer
	w := parquet.NewGenericWriter[pqRow](&pq)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(pq.Bytes()), int64(pq.Len()))
	if err != nil || f.NumRows() != int64(len(rows)) || !strings.Contains(f.Schema().String(), "messages (LIST)") || !strings.Contains(f.Schema().String(), "binary prompt (STRING)") {
		t.Fatalf("parquet footer: %v rows, schema %v, %v", f.NumRows(), f.Schema(), err)
	}

	files := map[string][]byte{
		"rows.jsonl": jl.Bytes(), "rows.json": arr, "rows.json.gz": gz(arr), "rows.jsonl.gz": gz(jl.Bytes()),
		"lines.json": jl.Bytes(), "rows.parquet": pq.Bytes(),
	}
	var ref map[string][]byte
	for _, name := range []string{"rows.jsonl", "rows.json", "rows.json.gz", "rows.jsonl.gz", "lines.json", "rows.parquet"} {
		in := filepath.Join(t.TempDir(), name)
		writeFile(t, in, files[name])
		out := t.TempDir()
		_, err := Prepare(context.Background(), PrepareOptions{Inputs: []string{in}, Tokenizer: tok, OutputDir: out, ValFraction: 0.4})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := map[string][]byte{}
		for _, f := range []string{"train_000000.bin", "train_000000.mask", "val_000000.bin", "val_000000.mask"} {
			b, err := os.ReadFile(filepath.Join(out, f))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got[f] = b
		}
		if ref == nil {
			ref = got
			continue
		}
		for f, b := range got {
			if !bytes.Equal(b, ref[f]) {
				t.Errorf("%s: %s differs from the JSON Lines one", name, f)
			}
		}
	}
}
