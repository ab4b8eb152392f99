package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// snapshotNames lists every tensor name of a snapshot's weight files with
// its raw bytes as stored.
func snapshotNames(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := []string{filepath.Join(dir, hfWeightsName)}
	if idx, err := os.ReadFile(filepath.Join(dir, hfIndexName)); err == nil {
		var doc struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(idx, &doc); err != nil {
			t.Fatal(err)
		}
		files = nil
		for _, f := range doc.WeightMap {
			if !slices.Contains(files, filepath.Join(dir, f)) {
				files = append(files, filepath.Join(dir, f))
			}
		}
	}
	out := map[string][]byte{}
	for _, p := range files {
		st, err := OpenSafetensors(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range st.Tensors() {
			_, raw, err := st.Raw(h.Name)
			if err != nil {
				t.Fatal(err)
			}
			out[h.Name] = raw
		}
		st.Close()
	}
	return out
}

func readIndex(t *testing.T, dir string) (total int64, weightMap map[string]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, hfIndexName))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Metadata struct {
			TotalSize int64 `json:"total_size"`
		} `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Metadata.TotalSize, doc.WeightMap
}

func torchDType(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, hfConfigName))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	s, _ := doc["torch_dtype"].(string)
	return s
}

// TestExportSnapshotSplitsAsHuggingFace: the BF16 two-shard fixture,
// exported in BF16 with the limit its script used (60% of the bytes),
// comes out split exactly as huggingface_hub split it (the same
// weight_map and total_size), with every tensor's bytes equal to the
// fixture's, torch_dtype "bfloat16", and it reads back bit for bit.
func TestExportSnapshotSplitsAsHuggingFace(t *testing.T) {
	src := fixtureDir("llama_linear_rope")
	cfg, params, err := LoadSnapshot(src)
	if err != nil {
		t.Fatal(err)
	}
	wantTotal, wantMap := readIndex(t, src)
	out := t.TempDir()
	files, err := ExportSnapshot(out, cfg, SliceReader(params), SnapshotOptions{DType: backend.BF16, MaxShardSize: int64(0.6 * float64(wantTotal))})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Fatalf("wrote %v, want two shards", files)
	}
	total, weightMap := readIndex(t, out)
	if total != wantTotal {
		t.Errorf("total_size %d, want %d", total, wantTotal)
	}
	for name, shard := range wantMap {
		if weightMap[name] != shard {
			t.Errorf("%s in %q, huggingface_hub put it in %q", name, weightMap[name], shard)
		}
	}
	if len(weightMap) != len(wantMap) {
		t.Errorf("%d tensors in the index, want %d", len(weightMap), len(wantMap))
	}
	want, got := snapshotNames(t, src), snapshotNames(t, out)
	for name, raw := range want {
		if !slices.Equal(got[name], raw) {
			t.Errorf("%s: exported bytes differ from the snapshot's", name)
		}
	}
	if len(got) != len(want) {
		t.Errorf("exported %d tensors, the snapshot has %d", len(got), len(want))
	}
	if d := torchDType(t, out); d != "bfloat16" {
		t.Errorf("torch_dtype %q for BF16 weights", d)
	}
	back, p2, err := LoadSnapshot(out)
	if err != nil {
		t.Fatal(err)
	}
	if back != cfg || !slices.Equal(p2, params) {
		t.Errorf("read back: config equal %v, weights equal %v", back == cfg, slices.Equal(p2, params))
	}
}

// TestExportSnapshotF32 exports an F32 tied Qwen3 snapshot: one
// model.safetensors with the snapshot's names and bytes (no lm_head), the
// tokenizer and generation files copied; then with a 1-byte limit, one
// tensor per shard, which reads back bit for bit; then again with the
// default limit into the same directory, which removes the shards and
// index of the split export.
func TestExportSnapshotF32(t *testing.T) {
	src := t.TempDir()
	for _, f := range []string{hfConfigName, hfWeightsName} {
		b, err := os.ReadFile(filepath.Join(fixtureDir("qwen3_qknorm"), f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(src, f), b, 0o644)
	}
	extras := map[string]string{"tokenizer.json": `{"model": {"type": "BPE"}}`, "generation_config.json": `{"top_k": 20}`}
	for f, s := range extras {
		os.WriteFile(filepath.Join(src, f), []byte(s), 0o644)
	}
	cfg, params, err := LoadSnapshot(src)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if _, err := ExportSnapshot(out, cfg, SliceReader(params), SnapshotOptions{CopyFrom: src}); err != nil {
		t.Fatal(err)
	}
	want, got := snapshotNames(t, src), snapshotNames(t, out)
	if len(got) != len(want) {
		t.Errorf("exported %d tensors, the snapshot has %d", len(got), len(want))
	}
	for name, raw := range want {
		if !slices.Equal(got[name], raw) {
			t.Errorf("%s: exported bytes differ from the snapshot's", name)
		}
	}
	if d := torchDType(t, out); d != "float32" {
		t.Errorf("torch_dtype %q for F32 weights", d)
	}
	for f, s := range extras {
		if b, err := os.ReadFile(filepath.Join(out, f)); err != nil || string(b) != s {
			t.Errorf("%s not copied: %q, %v", f, b, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "tokenizer_config.json")); err == nil {
		t.Error("tokenizer_config.json written although the snapshot has none")
	}

	files, err := ExportSnapshot(out, cfg, SliceReader(params), SnapshotOptions{MaxShardSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(want) {
		t.Errorf("a 1-byte limit wrote %d shards for %d tensors", len(files), len(want))
	}
	if _, err := os.Stat(filepath.Join(out, hfWeightsName)); err == nil {
		t.Error("the single-file export's model.safetensors is left beside the index")
	}
	back, p2, err := LoadSnapshot(out)
	if err != nil {
		t.Fatal(err)
	}
	if back != cfg || !slices.Equal(p2, params) {
		t.Errorf("sharded read back: config equal %v, weights equal %v", back == cfg, slices.Equal(p2, params))
	}
	if _, err := ExportSnapshot(out, cfg, SliceReader(params), SnapshotOptions{}); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(out, "model-*"))
	if _, err := os.Stat(filepath.Join(out, hfIndexName)); err == nil || len(left) > 0 {
		t.Errorf("re-export as one file left the index or shards %v", left)
	}
	if _, p3, err := LoadSnapshot(out); err != nil || !slices.Equal(p3, params) {
		t.Errorf("single-file read back: %v", err)
	}
}

// TestExportSnapshotGPT2 writes GPT-2 as SaveHF does: Conv1D weights
// transposed, wte cut to V rows; it reads back to the same weights.
func TestExportSnapshotGPT2(t *testing.T) {
	cfg := GPT2(Config{MaxT: 16, V: 50, Vp: 128, L: 2, NH: 2, C: 8})
	params := InitParams(cfg, 3)
	out := t.TempDir()
	if _, err := ExportSnapshot(out, cfg, SliceReader(params), SnapshotOptions{MaxShardSize: 2000}); err != nil {
		t.Fatal(err)
	}
	ref := filepath.Join(t.TempDir(), hfWeightsName)
	if err := SaveHF(ref, cfg, params, backend.F32); err != nil {
		t.Fatal(err)
	}
	want, got := snapshotNames(t, filepath.Dir(ref)), snapshotNames(t, out)
	for name, raw := range want {
		if !slices.Equal(got[name], raw) {
			t.Errorf("%s: differs from SaveHF's", name)
		}
	}
	back, p2, err := LoadSnapshot(out)
	if err != nil {
		t.Fatal(err)
	}
	if back != cfg || !slices.Equal(p2, params) {
		t.Errorf("read back: config equal %v, weights equal %v", back == cfg, slices.Equal(p2, params))
	}
}
