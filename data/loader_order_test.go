package data

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// SameOrderAs must agree with what the loaders actually serve: two
// layouts with the same samples per step (B·N·gas) are the same order
// exactly when the concatenation of their micro-batches is.
func TestSameOrderAsMatchesTheServedSamples(t *testing.T) {
	dir := t.TempDir()
	// Stream shards: 1+16·T·k tokens read alike by groups of 2T and 4T
	// tokens; 1+2T·3 tokens read to the end by 2T, to 4T by 4T.
	const T = 4
	seqShard(t, filepath.Join(dir, "a_000000.bin"), 0, 1+16*T)
	seqShard(t, filepath.Join(dir, "a_000001.bin"), 1000, 1+32*T)
	seqShard(t, filepath.Join(dir, "b_000000.bin"), 2000, 1+6*T)
	seqShard(t, filepath.Join(dir, "b_000001.bin"), 3000, 1+8*T)
	// Row shards: 8 rows (whole groups of 2 and 4), and 10 rows.
	rowShard := func(name string, rows int) string {
		path := filepath.Join(dir, name)
		var toks []int32
		var labels [][]bool
		for j := range rows {
			toks = append(toks, int32(j), int32(j+1))
			labels = append(labels, []bool{true, true})
		}
		if err := WriteShard(path, ShardGPT2, toks); err != nil {
			t.Fatal(err)
		}
		if err := WriteMask(MaskPath(path), labels, 0); err != nil {
			t.Fatal(err)
		}
		return path
	}
	rows8, rows10 := rowShard("r8.bin", 8), rowShard("r10.bin", 10)

	// serve concatenates, step after step, the micro-batches of every rank
	// of a layout (B per rank, N ranks, gas micro-steps), for steps steps.
	serve := func(o LoaderOptions, N, gas, steps int) []int32 {
		ls := make([]*Loader, N)
		for r := range ls {
			o.Rank, o.WorldSize = r, N
			l, err := NewLoader(o)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ls[r] = l
		}
		var out []int32
		in, tg := make([]int32, o.B*o.T), make([]int32, o.B*o.T)
		for range steps {
			var step []int32
			for range gas {
				for _, l := range ls {
					if err := l.Next(in, tg); err != nil {
						t.Fatal(err)
					}
					step = append(step, in...)
				}
			}
			// A step's loss is over its samples as a set; sort the rows.
			rows := make([][]int32, 0, len(step)/o.T)
			for i := 0; i < len(step); i += o.T {
				rows = append(rows, step[i:i+o.T])
			}
			slices.SortFunc(rows, slices.Compare)
			for _, r := range rows {
				out = append(out, r...)
			}
		}
		return out
	}
	for _, c := range []struct {
		name    string
		shards  string
		shuffle bool
		same    bool
		why     string
	}{
		{"stream", filepath.Join(dir, "a_*.bin"), false, true, ""},
		{"stream-tail", filepath.Join(dir, "b_*.bin"), false, false, "b_000000.bin (25 tokens)"},
		{"stream-shuffle", filepath.Join(dir, "a_*.bin"), true, false, "shuffling permutes groups"},
		{"rows", rows8, false, true, ""},
		{"rows-shuffle", rows8, true, true, ""},
		{"rows-tail", rows10, false, false, "each epoch of 10 rows"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Saved by 2 ranks at B = 2, gas 1; read by 1 rank at B = 1, gas 4.
			o := LoaderOptions{Shards: []string{c.shards}, T: T, Vocab: 50257, Shuffle: c.shuffle, Seed: 5}
			if !strings.Contains(c.shards, "*") {
				o.T = 1
			}
			a, b := o, o
			a.B, b.B = 2, 1
			a.WorldSize = 2
			saver, err := NewLoader(a)
			if err != nil {
				t.Fatal(err)
			}
			defer saver.Close()
			b.WorldSize = 1
			reader, err := NewLoader(b)
			if err != nil {
				t.Fatal(err)
			}
			defer reader.Close()
			err = reader.SameOrderAs(saver.Save())
			if (err == nil) != c.same || (err != nil && !strings.Contains(err.Error(), c.why)) {
				t.Fatalf("SameOrderAs: %v, want same %v (%q)", err, c.same, c.why)
			}
			// Over several epochs the served steps agree exactly when
			// SameOrderAs says so.
			x, y := serve(a, 2, 1, 30), serve(b, 1, 4, 30)
			if slices.Equal(x, y) != c.same {
				t.Fatalf("served samples equal %v, SameOrderAs said %v", slices.Equal(x, y), c.same)
			}
		})
	}
}
