package checkpoint

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gotrain/gotrain/model"
)

// benchConfig has 4.3M parameters: 17 MB per state kind, 52 MB per tag.
func benchConfig() model.Config {
	return model.GPT2(model.Config{MaxT: 256, V: 4096, Vp: 4096, L: 4, NH: 4, C: 256})
}

func benchState(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i%1000) * 0.001
	}
	return v
}

// BenchmarkSaveP4M is one rank writing every kind and finishing the tag
// (fsync, streamed checksums, meta.json, renames).
func BenchmarkSaveP4M(b *testing.B) {
	lay := model.NewLayout(benchConfig())
	vals := benchState(lay.NumParams())
	dir := b.TempDir()
	b.SetBytes(int64(4 * len(vals) * len(AllKinds())))
	for i := 0; b.Loop(); i++ {
		w, err := NewTagWriter(dir, TagName(int64(i)), lay, AllKinds(), WriterOptions{Rank: 0, World: 1, SaveTotalLimit: 1})
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range AllKinds() {
			if err := w.WriteRange(k, 0, vals); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Finish(Metadata{Step: int64(i), Model: ModelConfigOf(lay.Config())}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlainWriteP4M writes the same bytes to plain files with one
// fsync each: the bandwidth the save is measured against.
func BenchmarkPlainWriteP4M(b *testing.B) {
	lay := model.NewLayout(benchConfig())
	vals := benchState(lay.NumParams())
	raw := make([]byte, 4*len(vals))
	for i, x := range vals {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
	}
	dir := b.TempDir()
	b.SetBytes(int64(len(raw) * len(AllKinds())))
	for b.Loop() {
		for _, k := range AllKinds() {
			if err := writeSynced(filepath.Join(dir, k.FileName()), raw); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkLoadP4M reads every kind back whole through ReadRange.
func BenchmarkLoadP4M(b *testing.B) {
	lay := model.NewLayout(benchConfig())
	vals := benchState(lay.NumParams())
	dir := b.TempDir()
	w, err := NewTagWriter(dir, TagName(1), lay, AllKinds(), WriterOptions{Rank: 0, World: 1})
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range AllKinds() {
		if err := w.WriteRange(k, 0, vals); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Finish(Metadata{Step: 1, Model: ModelConfigOf(lay.Config())}); err != nil {
		b.Fatal(err)
	}
	r, err := Open(dir, "")
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	dst := make([]float32, len(vals))
	b.SetBytes(int64(4 * len(vals) * len(AllKinds())))
	for b.Loop() {
		for _, k := range AllKinds() {
			if err := r.ReadRangeInto(k, 0, dst); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkPlainReadP4M reads the same bytes from a plain file.
func BenchmarkPlainReadP4M(b *testing.B) {
	n := model.NewLayout(benchConfig()).NumParams()
	path := filepath.Join(b.TempDir(), "plain")
	if err := writeSynced(path, make([]byte, 4*n)); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 4*n)
	b.SetBytes(int64(4 * n * len(AllKinds())))
	for b.Loop() {
		for range AllKinds() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.ReadAt(buf, 0); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	}
}
