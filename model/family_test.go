package model

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// fixtureConfig loads a fixture case's config.json.
func fixtureConfig(t *testing.T, name string) Config {
	t.Helper()
	cfg, err := LoadHFConfig(fixtureDir(name) + "/config.json")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// familyTestParams are random weights for a family config: norm gains
// near 1, everything else spread enough that every path shapes the loss.
func familyTestParams(cfg Config, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 3))
	lay := NewLayout(cfg)
	p := make([]float32, lay.NumParams())
	for _, ts := range lay.Tensors() {
		for i := range ts.Len {
			switch {
			case strings.HasSuffix(ts.Name, "norm.weight") || strings.HasSuffix(ts.Name, "layernorm.weight"):
				p[ts.Offset+i] = float32(1 + 0.1*rng.NormFloat64())
			case ts.Decay:
				p[ts.Offset+i] = float32(0.3 * rng.NormFloat64())
			default:
				p[ts.Offset+i] = float32(0.1 * rng.NormFloat64())
			}
		}
	}
	return p
}

// TestFamilyLayout: names, shapes and decay follow the architecture;
// q/k/v (and their biases) and gate/up sit adjacent so the forward pass
// reads each as one matrix; the groups tile the buffer with lm_head in
// the last; every name is a Hugging Face name.
func TestFamilyLayout(t *testing.T) {
	cfg := fixtureConfig(t, "llama_mqa_llama3rope") // biases everywhere, MQA, tied
	lay := NewLayout(cfg)
	var names []string
	for _, ts := range lay.GroupTensors(1) {
		names = append(names, strings.TrimPrefix(ts.Name, "model.layers.0."))
	}
	want := []string{"input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
		"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias", "self_attn.o_proj.weight", "self_attn.o_proj.bias",
		"post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.gate_proj.bias", "mlp.up_proj.bias",
		"mlp.down_proj.weight", "mlp.down_proj.bias"}
	if !slices.Equal(names, want) {
		t.Errorf("block 0 holds\n %v\nwant\n %v", names, want)
	}
	get := func(name string) Tensor {
		ts, ok := lay.Lookup(name)
		if !ok {
			t.Fatalf("no tensor %s", name)
		}
		return ts
	}
	q, k, v := get("model.layers.1.self_attn.q_proj.weight"), get("model.layers.1.self_attn.k_proj.weight"), get("model.layers.1.self_attn.v_proj.weight")
	if !slices.Equal(q.Shape, []int{32, 32}) || !slices.Equal(k.Shape, []int{8, 32}) || q.Offset+q.Len != k.Offset || k.Offset+k.Len != v.Offset {
		t.Errorf("q %v@%d, k %v@%d, v @%d: not one (NH+2KV)·HD × C matrix", q.Shape, q.Offset, k.Shape, k.Offset, v.Offset)
	}
	g, u := get("model.layers.1.mlp.gate_proj.weight"), get("model.layers.1.mlp.up_proj.weight")
	if g.Offset+g.Len != u.Offset || !slices.Equal(get("model.layers.1.mlp.down_proj.weight").Shape, []int{32, 48}) {
		t.Errorf("gate_proj and up_proj are not adjacent")
	}
	for _, ts := range lay.Tensors() {
		matrix := len(ts.Shape) == 2
		if ts.Decay != matrix {
			t.Errorf("%s: decay %v; Hugging Face's Trainer decays matrices and embeddings only", ts.Name, ts.Decay)
		}
	}
	if _, ok := lay.Lookup("lm_head.weight"); ok {
		t.Error("a tied model has lm_head.weight")
	}

	untied := fixtureConfig(t, "qwen3_qknorm")
	untied.TiedHead = false
	lay = NewLayout(untied)
	fo, fn := lay.FinalRange()
	head := get2(t, lay, "lm_head.weight")
	if head.Offset+head.Len != fo+fn || head.Offset < fo || !slices.Equal(head.Shape, []int{97, 32}) {
		t.Errorf("lm_head %+v is not the end of the final group [%d, %d)", head, fo, fo+fn)
	}
	if n := get2(t, lay, "model.layers.0.self_attn.q_norm.weight"); !slices.Equal(n.Shape, []int{16}) || n.Decay {
		t.Errorf("q_norm %+v", n)
	}
	if q := get2(t, lay, "model.layers.0.self_attn.q_proj.weight"); !slices.Equal(q.Shape, []int{64, 32}) {
		t.Errorf("qwen3 q_proj %v, want [64 32] (head_dim 16 ≠ 32/4)", q.Shape)
	}
	total := 0
	for g := range lay.NumGroups() {
		o, n := lay.GroupRange(g)
		if o != total {
			t.Fatalf("group %d starts at %d, want %d", g, o, total)
		}
		total += n
	}
	if total != untied.NumParams() || total != lay.NumParams() {
		t.Errorf("groups cover %d, NumParams %d", total, untied.NumParams())
	}
}

func get2(t *testing.T, lay *Layout, name string) Tensor {
	t.Helper()
	ts, ok := lay.Lookup(name)
	if !ok {
		t.Fatalf("no tensor %s", name)
	}
	return ts
}

// TestFamilyParamStore: an untied model releases the embeddings right
// after the lookup and acquires them last in backward; a tied one keeps
// them through the classifier (as GPT-2). Each matches AcquisitionOrder,
// and the gradients equal a direct run's.
func TestFamilyParamStore(t *testing.T) {
	for _, tc := range []struct {
		name, calls string
	}{
		{"llama_gqa", "A0f R0f A1f R1f A2f R2f A3f R3f A3b R3b A2b R2b A1b R1b A0b R0b"},
		{"qwen3_qknorm", "A0f A1f R1f A2f R2f A3f R3f R0f A0b A3b R3b A2b R2b A1b R1b R0b"},
	} {
		cfg := fixtureConfig(t, tc.name)
		host := familyTestParams(cfg, 15)
		ref := newModel(t, cfg, host, Options{})
		be := newCPU()
		inner, err := newTestModel(be, cfg, Options{}, backend.F32)
		if err != nil {
			t.Fatal(err)
		}
		defer inner.Free()
		if err := inner.SetParams(host); err != nil {
			t.Fatal(err)
		}
		st := &recordingStore{ParamStore: inner.eng}
		m, err := New(be, cfg, Options{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Free()
		inp, tgt := []int32{1, 2, 3, 4}, []int32{2, 3, 4, 5}
		want, _ := ref.Forward(inp, tgt, 1, 4)
		got, err := m.Forward(inp, tgt, 1, 4)
		if err != nil || got != want {
			t.Fatalf("%s: loss %v (%v) through the store, %v directly", tc.name, got, err, want)
		}
		if err := ref.Backward(0.5); err != nil {
			t.Fatal(err)
		}
		if err := m.Backward(0.5); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(st.calls, " "); got != tc.calls {
			t.Errorf("%s store calls\n got %s\nwant %s", tc.name, got, tc.calls)
		}
		var first [2][]int
		for _, c := range st.calls {
			if c[0] == 'A' {
				var g int
				fmt.Sscanf(c[1:len(c)-1], "%d", &g)
				k := 0
				if c[len(c)-1] == 'b' {
					k = 1
				}
				first[k] = append(first[k], g)
			}
		}
		for k, bw := range []bool{false, true} {
			if !slices.Equal(first[k], m.Layout().AcquisitionOrder(bw)) {
				t.Errorf("%s backward=%v: acquired %v, AcquisitionOrder %v", tc.name, bw, first[k], m.Layout().AcquisitionOrder(bw))
			}
		}
		wg, _ := ref.HostGrads()
		gg, _ := inner.HostGrads()
		if !slices.Equal(wg, gg) {
			t.Errorf("%s: gradients through the recording store differ", tc.name)
		}
	}
}

// TestFamilyCheckpointingBitIdentical: recomputing blocks from their kept
// inputs gives exactly the gradients and loss of keeping every
// activation, for Qwen3's q/k norms (their own buffers) and an untied GQA
// head, over two logit chunks and accumulated micro-batches, with the
// kept inputs on the device or in host memory.
func TestFamilyCheckpointingBitIdentical(t *testing.T) {
	for _, name := range []string{"qwen3_qknorm", "llama_gqa"} {
		cfg := fixtureConfig(t, name)
		cfg.MaxT = 160
		host := familyTestParams(cfg, 21)
		rng := rand.New(rand.NewPCG(4, 5))
		const B, T = 2, 150 // N = 300 rows: two logit chunks
		batches := make([][2][]int32, 2)
		for i := range batches {
			batches[i] = [2][]int32{randomTokens(rng, B*T, cfg.V), randomTokens(rng, B*T, cfg.V)}
		}
		run := func(opts Options) (float32, []float32) {
			m := newModel(t, cfg, host, opts)
			var loss float32
			for _, b := range batches {
				l, err := m.Forward(b[0], b[1], B, T)
				if err != nil {
					t.Fatal(err)
				}
				loss += l
				if err := m.Backward(0.25); err != nil {
					t.Fatal(err)
				}
			}
			g, err := m.HostGrads()
			if err != nil {
				t.Fatal(err)
			}
			return loss, g
		}
		wantLoss, want := run(Options{})
		for _, pool := range []backend.Pool{backend.Device, backend.Host} {
			loss, got := run(Options{Checkpoint: true, CheckpointPool: pool})
			diff := 0
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					diff++
				}
			}
			if loss != wantLoss || diff > 0 {
				t.Errorf("%s pool %s: loss %v vs %v, %d of %d gradients differ in their bits", name, pool, loss, wantLoss, diff, len(want))
			}
		}
	}
}

// TestFamilyActivationAccounting: the model's own plan (ActivationBytes) is
// what the backend accounts, for every fixture architecture with and
// without checkpointing (the RoPE tables included).
func TestFamilyActivationAccounting(t *testing.T) {
	for _, name := range familyCases {
		cfg := fixtureConfig(t, name)
		for _, ckpt := range []bool{false, true} {
			be := newCPU()
			m, err := newTestModel(be, cfg, Options{Checkpoint: ckpt}, backend.F32)
			if err != nil {
				t.Fatal(err)
			}
			const B, T = 3, 40
			if err := m.ReserveActivations(B, T); err != nil {
				t.Fatal(err)
			}
			held := be.Memory().Current[backend.Device][backend.Activations]
			if est := ActivationBytes(cfg, B, T, backend.F32, ckpt); held != m.ActivationBytes() || held != est {
				t.Errorf("%s ckpt=%v: backend holds %d, model says %d, ActivationBytes %d", name, ckpt, held, m.ActivationBytes(), est)
			}
			m.Free()
		}
	}
}

// TestPadTokenGetsNoEmbeddingGradient: with pad_token_id set, positions
// holding it add nothing to the embedding's gradient (nn.Embedding's
// padding_idx); everything else is as without it, bit for bit.
func TestPadTokenGetsNoEmbeddingGradient(t *testing.T) {
	cfg := fixtureConfig(t, "llama_gqa") // untied: the head adds nothing to the embedding
	host := familyTestParams(cfg, 31)
	inp := []int32{5, 7, 5, 9, 11, 5, 3, 2}
	tgt := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	grads := func(c Config) []float32 {
		m := newModel(t, c, host, Options{})
		if _, err := m.Forward(inp, tgt, 2, 4); err != nil {
			t.Fatal(err)
		}
		if err := m.Backward(1); err != nil {
			t.Fatal(err)
		}
		g, _ := m.HostGrads()
		return g
	}
	plain := grads(cfg)
	padded := cfg
	padded.PadID = 5
	g := grads(padded)
	emb := get2(t, NewLayout(cfg), "model.embed_tokens.weight")
	C := cfg.C
	for i := range g {
		row := (i - emb.Offset) / C
		inRow5 := i >= emb.Offset && i < emb.Offset+emb.Len && row == 5
		switch {
		case inRow5 && g[i] != 0:
			t.Fatalf("padding row element %d has gradient %v", i-emb.Offset, g[i])
		case inRow5 && plain[i] == 0:
			t.Fatalf("the unpadded run gives row 5 no gradient either: the test shows nothing")
		case !inRow5 && g[i] != plain[i]:
			t.Fatalf("element %d: %v with a padding id, %v without", i, g[i], plain[i])
		}
	}
}

// noDecoderOps is a backend without the family's ops, as CUDA is today.
type noDecoderOps struct{ backend.Backend }

func TestFamilyNeedsDecoderOps(t *testing.T) {
	cfg := fixtureConfig(t, "qwen2_bias")
	inner, err := newTestModel(newCPU(), cfg, Options{}, backend.F32)
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Free()
	_, err = New(noDecoderOps{newCPU()}, cfg, Options{Store: inner.eng})
	wantErr(t, err, "RMSNorm", "cpu backend", "--device cpu")
	// GPT-2 needs none of them.
	gpt := tinyConfig
	g, err := newTestModel(newCPU(), gpt, Options{}, backend.F32)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Free()
	if _, err := New(noDecoderOps{newCPU()}, gpt, Options{Store: g.eng}); err != nil {
		t.Errorf("GPT-2 without DecoderOps: %v", err)
	}
}

// TestFamilyInit: transformers' _init_weights: Linear weights and the
// embedding N(0, initializer_range), biases 0, norm gains 1, the padding
// row 0; deterministic per seed and group.
func TestFamilyInit(t *testing.T) {
	raw := strings.Replace(familyJSON(ArchLlama, 256, 512, 2, 4, 2, 64, 1000, false), `"model_type"`, `"attention_bias": true, "mlp_bias": true, "initializer_range": 0.05, "pad_token_id": 7, "model_type"`, 1)
	cfg, err := ParseHFConfig("init/config.json", []byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	p := InitParams(cfg, 99)
	lay := NewLayout(cfg)
	for _, ts := range lay.Tensors() {
		x := p[ts.Offset : ts.Offset+ts.Len]
		switch {
		case strings.HasSuffix(ts.Name, "norm.weight") || strings.HasSuffix(ts.Name, "layernorm.weight"):
			if slices.ContainsFunc(x, func(v float32) bool { return v != 1 }) {
				t.Errorf("%s: not all ones", ts.Name)
			}
		case !ts.Decay:
			if slices.ContainsFunc(x, func(v float32) bool { return v != 0 }) {
				t.Errorf("%s: bias not zero", ts.Name)
			}
		default:
			if ts.Name == "model.embed_tokens.weight" {
				if slices.ContainsFunc(x[7*cfg.C:8*cfg.C], func(v float32) bool { return v != 0 }) {
					t.Errorf("padding row 7 is not zero")
				}
				x = x[8*cfg.C:]
			}
			mean, std := meanStd(x)
			n := float64(len(x))
			if math.Abs(std-0.05) > 6*0.05/math.Sqrt(2*n) || math.Abs(mean) > 6*0.05/math.Sqrt(n) {
				t.Errorf("%s: mean %.3g std %.5g, want 0 and 0.05", ts.Name, mean, std)
			}
		}
	}
	if q := InitParams(cfg, 99); !slices.Equal(p, q) {
		t.Error("the same seed gave different weights")
	}
}

// TestConfigJSONRoundTrip: the record a checkpoint keeps reads back to the
// same Config for every architecture, old GPT-2 records still read, and a
// record of an invalid model is refused.
func TestConfigJSONRoundTrip(t *testing.T) {
	cfgs := []Config{mustPreset(t, "gpt2"), tinyConfig}
	for _, name := range familyCases {
		cfgs = append(cfgs, fixtureConfig(t, name))
	}
	padded := fixtureConfig(t, "mistral")
	padded.PadID, padded.SlidingWindow, padded.BOS = 0, 64, -1
	cfgs = append(cfgs, padded)
	for _, c := range cfgs {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var back Config
		if err := json.Unmarshal(b, &back); err != nil || back != c {
			t.Errorf("%v: %s read back as %+v, %v", c, b, back, err)
		}
	}
	old := `{"n_positions":8,"vocab_size":11,"padded_vocab_size":16,"n_layer":2,"n_head":2,"n_embd":8}`
	var c Config
	if err := json.Unmarshal([]byte(old), &c); err != nil || c != tinyConfig {
		t.Errorf("an older GPT-2 record: %+v, %v", c, err)
	}
	bad := `{"architecture":"qwen2","vocab_size":11,"max_position_embeddings":8,"num_hidden_layers":1,"hidden_size":8,"num_attention_heads":2,"num_key_value_heads":2,"head_dim":4,"intermediate_size":8,"rms_norm_eps":1e-6,"rope":{"rope_theta":1e4,"rope_type":"default"}}`
	if err := json.Unmarshal([]byte(bad), &c); err == nil || !strings.Contains(err.Error(), "qwen2") {
		t.Errorf("a qwen2 record without q/k/v biases: %v", err)
	}
}

// TestOneLayerModels: with L = 1 the block's tensors still form group 1
// (a one-block spec list must not be mistaken for the embeddings), and a
// one-layer GPT-2 matches the float64 reference.
func TestOneLayerModels(t *testing.T) {
	gpt := GPT2(Config{MaxT: 8, V: 11, Vp: 16, L: 1, NH: 2, C: 8})
	raw := strings.Replace(familyJSON(ArchQwen3, 32, 48, 1, 4, 2, 16, 97, false), `"max_position_embeddings": 4096`, `"max_position_embeddings": 16`, 1)
	qwen, err := ParseHFConfig("one/config.json", []byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []Config{gpt, qwen} {
		lay := NewLayout(cfg)
		for g, want := range map[int]int{0: -1, 1: 0, 2: -1} {
			for _, ts := range lay.GroupTensors(g) {
				if ts.Layer != want {
					t.Errorf("%s: %s (layer %d) in group %d", cfg.Arch, ts.Name, ts.Layer, g)
				}
			}
		}
	}
	params := testParams(gpt, 5)
	ref := &refGPT2{cfg: gpt, lay: NewLayout(gpt), p: f64s(params)}
	m := newModel(t, gpt, params, Options{})
	inp, tgt := []int32{1, 2, 3, 4, 5, 6}, []int32{2, 3, 4, 5, 6, 7}
	loss, err := m.Forward(inp, tgt, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := ref.meanLoss(inp, tgt, 2, 3); !closeTo(float64(loss), want, 1e-6, 1e-5) {
		t.Errorf("one-layer GPT-2 loss %.7f, float64 reference %.7f", loss, want)
	}
	q := newModel(t, qwen, familyTestParams(qwen, 6), Options{})
	if _, err := q.Forward(inp, tgt, 2, 3); err != nil {
		t.Fatal(err)
	}
	if err := q.Backward(1); err != nil {
		t.Fatal(err)
	}
}

// TestFamilyBF16: bf16 parameters and activations (RoPE tables and norm
// statistics stay F32) give the fp32 run's loss within bf16's precision
// and a gradient pointing the same way, for Qwen3's q/k norms and an
// untied GQA model.
func TestFamilyBF16(t *testing.T) {
	for _, name := range []string{"qwen3_qknorm", "llama_gqa"} {
		cfg := fixtureConfig(t, name)
		params := familyTestParams(cfg, 51)
		for i, p := range params {
			params[i] = backend.F32FromBF16(backend.BF16FromF32(p))
		}
		rng := rand.New(rand.NewPCG(9, 9))
		const B, T = 2, 16
		inp, tgt := randomTokens(rng, B*T, cfg.V), randomTokens(rng, B*T, cfg.V)
		run := func(m *tmodel) (float32, []float32) {
			loss, err := m.Forward(inp, tgt, B, T)
			if err != nil {
				t.Fatal(err)
			}
			m.ZeroGrad()
			if err := m.Backward(1 / float32(B*T)); err != nil {
				t.Fatal(err)
			}
			g, _ := m.HostGrads()
			return loss, g
		}
		loss16, g16 := run(newModelDT(t, cfg, params, Options{ActDType: backend.BF16}, backend.BF16))
		loss32, g32 := run(newModel(t, cfg, params, Options{}))
		if !closeTo(float64(loss16), float64(loss32), 0, 0.03) {
			t.Errorf("%s: bf16 loss %.5f, fp32 %.5f", name, loss16, loss32)
		}
		var dot, n1, n2 float64
		for i := range g16 {
			dot += float64(g16[i]) * float64(g32[i])
			n1 += float64(g16[i]) * float64(g16[i])
			n2 += float64(g32[i]) * float64(g32[i])
		}
		if cos := dot / math.Sqrt(n1*n2); cos < 0.99 {
			t.Errorf("%s: bf16 gradient cosine to fp32 %.4f, want ≥ 0.99", name, cos)
		}
	}
}
