package model

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// copyFixture copies a fixture snapshot's files into a fresh directory.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	ents, err := os.ReadDir(fixtureDir(name))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(fixtureDir(name), e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestSnapshotShardedBF16 reads the two-shard BF16 fixture by its index:
// every layout tensor holds exactly the shard's values widened to float32
// (read here straight from the shard files), and any range of the flat
// layout, read alone, equals the same range of the whole.
func TestSnapshotShardedBF16(t *testing.T) {
	dir := fixtureDir("llama_linear_rope")
	w, err := OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	all, err := w.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, shard := range []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"} {
		st, err := OpenSafetensors(filepath.Join(dir, shard))
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range st.Tensors() {
			if h.DType != "BF16" {
				t.Errorf("%s is %s", h.Name, h.DType)
			}
			_, raw, _ := st.Raw(h.Name)
			ts, ok := w.Layout().Lookup(h.Name)
			if !ok {
				t.Fatalf("%s is not in the layout", h.Name)
			}
			for i := range ts.Len {
				want := backend.F32FromBF16(uint16(raw[2*i]) | uint16(raw[2*i+1])<<8)
				if all[ts.Offset+i] != want {
					t.Fatalf("%s[%d] = %v, shard holds %v", h.Name, i, all[ts.Offset+i], want)
				}
			}
			found++
		}
		st.Close()
	}
	if found != len(w.Layout().Tensors()) {
		t.Errorf("shards hold %d tensors, layout %d", found, len(w.Layout().Tensors()))
	}
	rng := rand.New(rand.NewPCG(1, 9))
	for range 50 {
		off := rng.IntN(len(all))
		n := rng.IntN(len(all) - off + 1)
		part := make([]float32, n)
		if err := w.ReadRange(part, off); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(part, all[off:off+n]) {
			t.Fatalf("range [%d, %d) differs from the whole read", off, off+n)
		}
	}
	if err := w.ReadRange(make([]float32, 2), len(all)-1); err == nil {
		t.Error("a range past the end was read")
	}
}

// TestGPT2WeightsRange: ranges of a GPT-2 file (Conv1D transposes, wte's
// padded rows) read alone equal the whole read.
func TestGPT2WeightsRange(t *testing.T) {
	cfg := hfTestConfig
	dir := t.TempDir()
	params := randomParams(cfg, 8)
	if err := SaveHF(filepath.Join(dir, "model.safetensors"), cfg, params, backend.F32); err != nil {
		t.Fatal(err)
	}
	if err := WriteHFConfig(filepath.Join(dir, "config.json"), cfg); err != nil {
		t.Fatal(err)
	}
	w, err := OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rng := rand.New(rand.NewPCG(2, 9))
	for range 100 {
		off := rng.IntN(len(params))
		n := rng.IntN(len(params) - off + 1)
		part := make([]float32, n)
		if err := w.ReadRange(part, off); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(part, params[off:off+n]) {
			t.Fatalf("range [%d, %d) differs", off, off+n)
		}
	}
}

// TestWeightsListEveryProblem: one error names every missing tensor,
// every unexpected one, every shape mismatch and every non-float dtype.
func TestWeightsListEveryProblem(t *testing.T) {
	dir := copyFixture(t, "qwen3_qknorm")
	path := filepath.Join(dir, "model.safetensors")
	st, err := OpenSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	var ts []NamedTensor
	for _, h := range st.Tensors() {
		_, raw, _ := st.Raw(h.Name)
		nt := NamedTensor{Name: h.Name, DType: backend.F32, Shape: h.Shape, Data: raw}
		switch h.Name {
		case "model.layers.1.mlp.up_proj.weight":
			continue // missing
		case "model.layers.0.self_attn.q_proj.weight":
			nt.Shape = []int{h.Shape[1], h.Shape[0]} // transposed
		case "model.norm.weight":
			nt.DType = backend.I32
		}
		ts = append(ts, nt)
	}
	st.Close()
	ts = append(ts, NamedTensor{Name: "model.layers.0.mlp.experts.0.weight", DType: backend.F32, Shape: []int{1}, Data: make([]byte, 4)})
	if err := SaveSafetensors(path, ts, nil); err != nil {
		t.Fatal(err)
	}
	_, err = OpenSnapshot(dir)
	wantErr(t, err, path, "4 problems",
		`missing "model.layers.1.mlp.up_proj.weight" (shape [48 32])`,
		`"model.layers.0.self_attn.q_proj.weight" has shape [32 64], want [64 32]`,
		`"model.norm.weight" is I32`,
		`unexpected "model.layers.0.mlp.experts.0.weight"`)
}

// TestWeightsIndexRefusals: an index is untrusted: a shard outside the
// snapshot directory, a tensor mapped to a shard that lacks it, and an
// empty map are refused by name.
func TestWeightsIndexRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(map[string]string)
		say  string
	}{
		{"escape", func(m map[string]string) { m["model.norm.weight"] = "../model-00002-of-00002.safetensors" }, "not a file name"},
		{"wrong shard", func(m map[string]string) { m["model.norm.weight"] = "model-00001-of-00002.safetensors" }, "does not hold it"},
		{"empty", func(m map[string]string) { clear(m) }, "weight_map"},
	} {
		dir := copyFixture(t, "llama_linear_rope")
		index := filepath.Join(dir, "model.safetensors.index.json")
		raw, _ := os.ReadFile(index)
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(raw, &idx); err != nil {
			t.Fatal(err)
		}
		tc.edit(idx.WeightMap)
		raw, _ = json.Marshal(idx)
		os.WriteFile(index, raw, 0o644)
		_, err := OpenSnapshot(dir)
		if err == nil || !strings.Contains(err.Error(), tc.say) || !strings.Contains(err.Error(), "index") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestFamilySaveHFRoundTripAndTiedHead: SaveHF writes HF names and shapes
// that LoadHF (config.json beside) reads back exactly; a tied model's
// stored lm_head is accepted when it equals the embedding and refused
// when it differs.
func TestFamilySaveHFRoundTripAndTiedHead(t *testing.T) {
	cfg := fixtureConfig(t, "qwen2_bias") // tied
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	params := familyTestParams(cfg, 41)
	if err := SaveHF(path, cfg, params, backend.F32); err != nil {
		t.Fatal(err)
	}
	if err := WriteHFConfig(filepath.Join(dir, "config.json"), cfg); err != nil {
		t.Fatal(err)
	}
	for _, load := range []func() (Config, []float32, error){
		func() (Config, []float32, error) { return LoadHF(path, nil) },
		func() (Config, []float32, error) { return InitFrom(dir, nil) },
	} {
		c, got, err := load()
		if err != nil || c != cfg || !slices.Equal(got, params) {
			t.Fatalf("round trip: %v", err)
		}
	}
	emb := get2(t, NewLayout(cfg), "model.embed_tokens.weight")
	head := slices.Clone(params[emb.Offset : emb.Offset+emb.Len])
	extra := NamedTensor{Name: "lm_head.weight", DType: backend.F32, Shape: []int{cfg.V, cfg.C}, Data: EncodeFloat32(head, backend.F32)}
	hfRewrite(t, path, cfg, params, func(s string) string { return s }, []NamedTensor{extra}, "")
	if _, _, err := LoadHF(path, nil); err != nil {
		t.Errorf("a stored lm_head equal to the embedding: %v", err)
	}
	head[3]++
	extra.Data = EncodeFloat32(head, backend.F32)
	hfRewrite(t, path, cfg, params, func(s string) string { return s }, []NamedTensor{extra}, "")
	_, _, err := LoadHF(path, nil)
	wantErr(t, err, "lm_head.weight", "tie_word_embeddings", path)
}

// FuzzSnapshotIndex feeds arbitrary bytes as model.safetensors.index.json
// beside the two BF16 shards of a fixture: opening never panics, every
// error names the index, and an index it accepts reads exactly the
// weights the genuine index gives.
func FuzzSnapshotIndex(f *testing.F) {
	src := fixtureDir("llama_linear_rope")
	dir := f.TempDir()
	for _, name := range []string{"config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			f.Fatal(err)
		}
	}
	genuine, err := os.ReadFile(filepath.Join(src, hfIndexName))
	if err != nil {
		f.Fatal(err)
	}
	_, want, err := LoadSnapshot(src)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(genuine)
	f.Add([]byte(`{"weight_map": {"lm_head.weight": "../model-00002-of-00002.safetensors"}}`))
	f.Add([]byte(`{"weight_map": {"lm_head.weight": "model-00001-of-00002.safetensors"}}`))
	f.Add([]byte(`{"weight_map": {}}`))
	f.Add([]byte(`[]`))
	index := filepath.Join(dir, hfIndexName)
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(index, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, got, err := LoadSnapshot(dir)
		if err != nil {
			if !strings.Contains(err.Error(), "index") && !strings.Contains(err.Error(), dir) {
				t.Fatalf("error %q names neither the index nor the snapshot", err)
			}
			return
		}
		if !slices.Equal(got, want) {
			t.Fatalf("index %q read different weights", b)
		}
	})
}
