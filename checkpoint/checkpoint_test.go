package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/model"
)

// testConfig is a tiny GPT-2 whose Vp is PadVocab(V), as LoadHF expects.
func testConfig() model.Config {
	return model.GPT2(model.Config{MaxT: 8, V: 50, Vp: model.PadVocab(50), L: 2, NH: 2, C: 8})
}

// newBarrier is a reusable in-process barrier for n goroutine ranks.
func newBarrier(n int) func() error {
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	count, gen := 0, 0
	return func() error {
		mu.Lock()
		defer mu.Unlock()
		g := gen
		count++
		if count == n {
			count, gen = 0, gen+1
			cond.Broadcast()
			return nil
		}
		for g == gen {
			cond.Wait()
		}
		return nil
	}
}

// sourceState is a deterministic value per kind and flat index; the padded
// rows of the embedding (the layout's first tensor) are zero so a Hugging
// Face export round-trips exactly.
func sourceState(cfg model.Config, seed uint64) map[Kind][]float32 {
	lay := model.NewLayout(cfg)
	rng := rand.New(rand.NewPCG(seed, 7))
	wte := lay.Tensors()[0]
	out := map[Kind][]float32{}
	for _, k := range AllKinds() {
		v := make([]float32, lay.NumParams())
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		clear(v[wte.Offset+cfg.V*cfg.C : wte.Offset+wte.Len])
		out[k] = v
	}
	return out
}

// cuts splits [0, n) into world ranges at random points, so ranges end in
// the middle of tensors.
func cuts(n, world int, rng *rand.Rand) []int {
	c := []int{0, n}
	for len(c) < world+1 {
		x := 1 + rng.IntN(n-1)
		if !slices.Contains(c, x) {
			c = append(c, x)
		}
	}
	slices.Sort(c)
	return c
}

// save writes src as tag step with world goroutine ranks, each writing its
// range in two calls; it returns rank 0's Finish error.
func save(t *testing.T, dir string, lay *model.Layout, src map[Kind][]float32, step int64, world, keep int) {
	t.Helper()
	if err := saveOrCrash(dir, lay, src, step, world, keep, false); err != nil {
		t.Fatal(err)
	}
}

func saveOrCrash(dir string, lay *model.Layout, src map[Kind][]float32, step int64, world, keep int, crash bool) error {
	bounds := cuts(lay.NumParams(), world, rand.New(rand.NewPCG(uint64(step), uint64(world))))
	barrier := newBarrier(world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for rank := range world {
		wg.Go(func() {
			w, err := NewTagWriter(dir, TagName(step), lay, AllKinds(), WriterOptions{Rank: rank, World: world, Barrier: barrier, SaveTotalLimit: keep})
			if err != nil {
				errs[rank] = err
				return
			}
			lo, hi := bounds[rank], bounds[rank+1]
			mid := lo + (hi-lo)/3
			for _, k := range AllKinds() {
				if err := w.WriteRange(k, mid, src[k][mid:hi]); err != nil {
					errs[rank] = err
					return
				}
				if crash {
					continue // the process dies before writing the rest
				}
				if err := w.WriteRange(k, lo, src[k][lo:mid]); err != nil {
					errs[rank] = err
					return
				}
			}
			if crash {
				return
			}
			meta := Metadata{Step: step, Samples: 4 * step, Tokens: 32 * step, Stage: 2, Precision: "bf16",
				Model: ModelConfigOf(lay.Config()), DeepSpeedConfig: `{"train_batch_size": 4}`,
				Scheduler: json.RawMessage(fmt.Sprintf(`{"last_batch_iteration":%d}`, step)),
				Seed:      1234, RunID: "lineage-a"}
			errs[rank] = w.Finish(meta)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func readAll(t *testing.T, r *Reader, k Kind, world int) []float32 {
	t.Helper()
	n := r.Meta().NumParams
	bounds := cuts(n, world, rand.New(rand.NewPCG(99, uint64(world))))
	var out []float32
	for rank := range world {
		v, err := r.ReadRange(k, bounds[rank], bounds[rank+1]-bounds[rank])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v...)
	}
	return out
}

func TestRoundTripReshard(t *testing.T) {
	cfg := testConfig()
	lay := model.NewLayout(cfg)
	for _, world := range []int{1, 2, 3} {
		dir := t.TempDir()
		src := sourceState(cfg, uint64(world))
		save(t, dir, lay, src, 10, world, 0)
		r, err := Open(dir, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Verify(); err != nil {
			t.Fatalf("world %d: %v", world, err)
		}
		if err := r.CheckModel(lay); err != nil {
			t.Fatal(err)
		}
		m := r.Meta()
		if m.Step != 10 || m.Samples != 40 || m.Tokens != 320 || m.WorldSize != world || m.Stage != 2 || m.Precision != "bf16" ||
			m.Model.Config() != cfg || m.Seed != 1234 || compact(m.Scheduler) != `{"last_batch_iteration":10}` || m.Tag != "global_step10" ||
			m.DeepSpeedConfig != `{"train_batch_size": 4}` {
			t.Errorf("world %d: meta round trip: step %d samples %d tokens %d world %d stage %d %s model %v seed %d scheduler %s tag %s",
				world, m.Step, m.Samples, m.Tokens, m.WorldSize, m.Stage, m.Precision, m.Model, m.Seed, m.Scheduler, m.Tag)
		}
		for _, k := range AllKinds() {
			for _, readWorld := range []int{1, world + 1, 5} {
				if got := readAll(t, r, k, readWorld); !slices.Equal(got, src[k]) {
					t.Errorf("saved by %d ranks, read by %d: %s differs", world, readWorld, k)
				}
			}
			// One range crossing several tensors, checked element by element.
			h0, _ := lay.Lookup("h.0.attn.c_proj.bias")
			off, n := h0.Offset-3, 2*cfg.C+7
			got, err := r.ReadRange(k, off, n)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, src[k][off:off+n]) {
				t.Errorf("%s [%d, %d) differs", k, off, off+n)
			}
		}
		// The file is a plain safetensors file: the model package's reader
		// sees each tensor under its name with the source's values.
		st, err := model.OpenSafetensors(filepath.Join(dir, "global_step10", "exp_avg_sq.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		wpe, _ := lay.Lookup("wpe.weight")
		v, h, err := st.ReadFloat32("wpe.weight")
		st.Close()
		if err != nil || !slices.Equal(h.Shape, []int{cfg.MaxT, cfg.C}) || !slices.Equal(v, src[ExpAvgSq][wpe.Offset:wpe.Offset+wpe.Len]) {
			t.Errorf("wpe.weight via OpenSafetensors: shape %v, err %v", h.Shape, err)
		}
		if st.Metadata()["layout"] != "gotrain-flat" {
			t.Errorf("__metadata__ = %v", st.Metadata())
		}
		r.Close()
	}
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return err.Error()
	}
	return b.String()
}

func readLatestFile(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "latest"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func tagNames(t *testing.T, dir string) []string {
	t.Helper()
	infos, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range infos {
		out = append(out, i.Tag)
	}
	return out
}

func TestLatestAndRetention(t *testing.T) {
	cfg := testConfig()
	lay := model.NewLayout(cfg)
	dir := t.TempDir()
	for _, step := range []int64{10, 20, 30} {
		save(t, dir, lay, sourceState(cfg, uint64(step)), step, 2, 2)
		if got := readLatestFile(t, dir); got != TagName(step) {
			t.Errorf("after saving %d latest = %q", step, got)
		}
	}
	if got := tagNames(t, dir); !slices.Equal(got, []string{"global_step20", "global_step30"}) {
		t.Errorf("K=2 kept %v", got)
	}
	// A save that has not finished removes nothing and is not listed.
	if err := saveOrCrash(dir, lay, sourceState(cfg, 40), 40, 2, 2, true); err != nil {
		t.Fatal(err)
	}
	if got := tagNames(t, dir); !slices.Equal(got, []string{"global_step20", "global_step30"}) {
		t.Errorf("during an unfinished save: %v", got)
	}
	save(t, dir, lay, sourceState(cfg, 40), 40, 3, 2)
	if got := tagNames(t, dir); !slices.Equal(got, []string{"global_step30", "global_step40"}) {
		t.Errorf("after step 40: %v", got)
	}
	infos, _ := List(dir)
	last := infos[len(infos)-1]
	wantBytes := int64(0)
	for _, k := range AllKinds() {
		fi, err := os.Stat(filepath.Join(dir, "global_step40", k.FileName()))
		if err != nil {
			t.Fatal(err)
		}
		wantBytes += fi.Size()
	}
	mi, _ := os.Stat(filepath.Join(dir, "global_step40", "meta.json"))
	if !last.Complete || !last.Latest || last.Step != 40 || last.WorldSize != 3 || last.Stage != 2 || last.Bytes != wantBytes+mi.Size() {
		t.Errorf("List: %+v (want %d bytes)", last, wantBytes+mi.Size())
	}
	// The tag latest names survives even when it is not among the newest.
	if err := os.WriteFile(filepath.Join(dir, "latest"), []byte("global_step30\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	save(t, dir, lay, sourceState(cfg, 50), 50, 1, 0)
	if err := os.WriteFile(filepath.Join(dir, "latest"), []byte("global_step30\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	removed, err := Prune(dir, 1, "lineage-a", 50)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{"global_step40"}) || !slices.Equal(tagNames(t, dir), []string{"global_step30", "global_step50"}) {
		t.Errorf("Prune(1) with latest → 30 removed %v, left %v", removed, tagNames(t, dir))
	}
}

func TestCrashMidSaveKeepsPrevious(t *testing.T) {
	cfg := testConfig()
	lay := model.NewLayout(cfg)
	dir := t.TempDir()
	src := sourceState(cfg, 1)
	save(t, dir, lay, src, 10, 2, 0)
	if err := saveOrCrash(dir, lay, sourceState(cfg, 2), 20, 3, 0, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".global_step20.tmp")); err != nil {
		t.Fatalf("the interrupted save left no temp dir: %v", err)
	}
	if got := readLatestFile(t, dir); got != "global_step10" {
		t.Errorf("latest = %q", got)
	}
	if got := tagNames(t, dir); !slices.Equal(got, []string{"global_step10"}) {
		t.Errorf("List = %v", got)
	}
	r, err := Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Verify(); err != nil {
		t.Fatal(err)
	}
	if r.Tag() != "global_step10" || !slices.Equal(readAll(t, r, ExpAvg, 4), src[ExpAvg]) {
		t.Errorf("previous tag %s not intact", r.Tag())
	}
	if _, err := Open(dir, "global_step20"); err == nil {
		t.Error("opened the interrupted tag")
	}
	// Saving the same step again replaces the leftover.
	save(t, dir, lay, sourceState(cfg, 3), 20, 2, 0)
	if got := tagNames(t, dir); !slices.Equal(got, []string{"global_step10", "global_step20"}) {
		t.Errorf("List after retry = %v", got)
	}
}

// damaged saves 10 and 20 and returns dir and the path of 20's exp_avg file
// and the absolute byte offset of element 5 of h.1.mlp.c_fc.weight in it,
// computed from the file's own length prefix and the layout.
func damaged(t *testing.T) (dir, path string, off int64) {
	cfg := testConfig()
	lay := model.NewLayout(cfg)
	dir = t.TempDir()
	save(t, dir, lay, sourceState(cfg, 1), 10, 1, 0)
	save(t, dir, lay, sourceState(cfg, 2), 20, 2, 0)
	path = filepath.Join(dir, "global_step20", "exp_avg.safetensors")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fc, _ := lay.Lookup("h.1.mlp.c_fc.weight")
	return dir, path, 8 + int64(binary.LittleEndian.Uint64(b)) + 4*int64(fc.Offset+5)
}

func wantMentions(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one mentioning %q", parts)
	}
	t.Log(err)
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}

func TestVerifyFlippedByte(t *testing.T) {
	dir, path, off := damaged(t)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	f.ReadAt(b[:], off)
	b[0] ^= 0x10
	f.WriteAt(b[:], off)
	f.Close()
	r, err := Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	wantMentions(t, r.Verify(), "exp_avg.safetensors", `"h.1.mlp.c_fc.weight"`, "global_step10")
}

func TestVerifyTruncated(t *testing.T) {
	dir, path, off := damaged(t)
	if err := os.Truncate(path, off); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir, "global_step20")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	wantMentions(t, r.Verify(), "exp_avg.safetensors", `"h.1.mlp.c_fc.weight"`, "truncated", "global_step10")
	_, err = r.ReadRange(ExpAvg, 0, r.Meta().NumParams)
	wantMentions(t, err, "exp_avg.safetensors", `"h.1.mlp.c_fc.weight"`, "global_step10")
	// The damage stays in its own tag.
	old, err := Open(dir, "global_step10")
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := old.Verify(); err != nil {
		t.Errorf("the untouched tag fails: %v", err)
	}
}

func TestCheckModelMismatch(t *testing.T) {
	cfg := testConfig()
	dir := t.TempDir()
	save(t, dir, model.NewLayout(cfg), sourceState(cfg, 1), 10, 1, 0)
	r, err := Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	deeper := cfg
	deeper.L = 3
	wantMentions(t, r.CheckModel(model.NewLayout(deeper)), "different model", `"ln_f.weight"`, `"h.2.ln_1.weight"`)
	longer := cfg
	longer.MaxT = 16
	// wte matches; wpe is the first tensor that differs.
	wantMentions(t, r.CheckModel(model.NewLayout(longer)), `"wpe.weight"`, "[8 8]", "[16 8]")
}

func TestOpenWithoutLatest(t *testing.T) {
	cfg := testConfig()
	dir := t.TempDir()
	save(t, dir, model.NewLayout(cfg), sourceState(cfg, 1), 10, 1, 0)
	save(t, dir, model.NewLayout(cfg), sourceState(cfg, 2), 20, 1, 0)
	os.Remove(filepath.Join(dir, "latest"))
	_, err := Open(dir, "")
	wantMentions(t, err, "latest", "global_step10", "global_step20")
}

// TestFamilyTagRoundTripAndExport: a tag of a Llama-family model records
// its whole Config (meta.json reads back to the same model, so a resume
// checks architecture and shape, not only GPT-2's six numbers), refuses a
// layout of another architecture with the same sizes, and exports a
// snapshot that reads back to the same config and weights.
func TestFamilyTagRoundTripAndExport(t *testing.T) {
	cfg, err := model.ParseHFConfig("qwen3/config.json", []byte(`{"model_type": "qwen3", "hidden_size": 16,
		"intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
		"vocab_size": 40, "max_position_embeddings": 32, "tie_word_embeddings": false, "rope_theta": 1000000.0,
		"rope_scaling": {"rope_type": "linear", "factor": 4.0}, "eos_token_id": [2, 3]}`))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lay := model.NewLayout(cfg)
	src := sourceState(cfg, 6)
	save(t, dir, lay, src, 10, 2, 0)
	r, err := Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Meta().Model.Config(); got != cfg {
		t.Errorf("meta.json model %+v, want %+v", got, cfg)
	}
	if err := r.CheckModel(lay); err != nil {
		t.Error(err)
	}
	other := cfg
	other.QKNorm, other.Arch, other.HFClass = false, model.ArchLlama, "LlamaForCausalLM"
	if err := r.CheckModel(model.NewLayout(other)); err == nil {
		t.Error("a layout without the q/k norms passed CheckModel")
	}
	r.Close()
	out := filepath.Join(t.TempDir(), "hf")
	if _, err := ExportHF(dir, "", out, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	gotCfg, params, err := model.LoadSnapshot(out)
	if err != nil {
		t.Fatal(err)
	}
	if gotCfg != cfg || !slices.Equal(params, src[Params]) {
		t.Errorf("export round trip: config %v, weights equal %v", gotCfg, slices.Equal(params, src[Params]))
	}
}

func TestExportHFRoundTrip(t *testing.T) {
	cfg := testConfig()
	dir := t.TempDir()
	src := sourceState(cfg, 5)
	save(t, dir, model.NewLayout(cfg), src, 10, 3, 0)
	out := filepath.Join(t.TempDir(), "hf")
	if _, err := ExportHF(dir, "", out, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	gotCfg, params, err := model.LoadHF(filepath.Join(out, "model.safetensors"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if gotCfg != cfg || !slices.Equal(params, src[Params]) {
		t.Errorf("export round trip: config %v, weights equal %v", gotCfg, slices.Equal(params, src[Params]))
	}
}

// TestExportHFShardedBF16: a tag holding the BF16 two-shard Llama fixture's
// weights exports in BF16, split one or two tensors per shard by a tiny
// --max-shard-size, to the fixture's tensor names and bytes exactly
// (its values are BF16 widened, so nothing rounds), and reads back bit for
// bit; the config says bfloat16.
func TestExportHFShardedBF16(t *testing.T) {
	snap := filepath.Join("..", "model", "testdata", "llama_tiny", "llama_linear_rope")
	cfg, params, err := model.LoadSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := sourceState(cfg, 7)
	src[Params] = params
	save(t, dir, model.NewLayout(cfg), src, 3, 2, 0)
	out := filepath.Join(t.TempDir(), "hf")
	files, err := ExportHF(dir, "", out, ExportOptions{DType: backend.BF16, MaxShardSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Errorf("a 4096-byte limit wrote %d files", len(files))
	}
	want := rawTensors(t, snap)
	got := rawTensors(t, out)
	if len(got) != len(want) {
		t.Errorf("exported %d tensors, the snapshot has %d", len(got), len(want))
	}
	for name, raw := range want {
		if !slices.Equal(got[name], raw) {
			t.Errorf("%s: exported bytes differ from the snapshot's (or the name is missing)", name)
		}
	}
	cfgJSON, err := os.ReadFile(filepath.Join(out, "config.json"))
	if err != nil || !strings.Contains(string(cfgJSON), `"torch_dtype": "bfloat16"`) {
		t.Errorf("config.json does not say bfloat16: %s", cfgJSON)
	}
	back, p2, err := model.LoadSnapshot(out)
	if err != nil {
		t.Fatal(err)
	}
	if back != cfg || !slices.Equal(p2, params) {
		t.Errorf("read back: config equal %v, weights equal %v", back == cfg, slices.Equal(p2, params))
	}
}

// rawTensors maps every tensor in a snapshot directory's weight files
// to its stored bytes.
func rawTensors(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "model*.safetensors"))
	out := map[string][]byte{}
	for _, p := range paths {
		st, err := model.OpenSafetensors(p)
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
