package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func importFixture(t *testing.T, name string) *Imported {
	t.Helper()
	im, err := ImportFile(filepath.Join("testdata", "import", name))
	if err != nil {
		t.Fatal(err)
	}
	return im
}

// loadImported parses the converted config as train would, for 4 ranks.
func loadImported(t *testing.T, im *Imported, ov Overrides) *Config {
	t.Helper()
	ov.WorldSize = 4
	c, err := Parse(im.File+" (imported)", im.DeepSpeed, Options{Strict: true, Overrides: ov})
	if err != nil {
		t.Fatalf("converted config does not load: %v\n%s", err, im.DeepSpeed)
	}
	return c
}

func hasLine(list []string, subs ...string) bool {
	for _, l := range list {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			return true
		}
	}
	return false
}

// TestImportSeed002FSDP: seed 002's FSDP config is FULL_SHARD with bf16: ZeRO-3 in bf16, and every wrap,
// prefetch and state-dict setting listed as ignored with its reason.
func TestImportSeed002FSDP(t *testing.T) {
	im := importFixture(t, "002_fsdp_config.json")
	if !strings.Contains(im.Kind, "FSDP") {
		t.Errorf("kind %q", im.Kind)
	}
	c := loadImported(t, im, Overrides{})
	if c.ZeRO.Stage != 3 || !c.BF16.Enabled || c.FP16.Enabled {
		t.Errorf("stage %d bf16 %v fp16 %v", c.ZeRO.Stage, c.BF16.Enabled, c.FP16.Enabled)
	}
	for _, k := range []string{"fsdp_transformer_layer_cls_to_wrap", "fsdp_auto_wrap_policy", "fsdp_backward_prefetch_policy",
		"fsdp_forward_prefetch", "fsdp_state_dict_type", "fsdp_sync_module_states", "fsdp_use_orig_params", "fsdp_cuda_graphs"} {
		if !hasLine(im.Ignored, k+": ") {
			t.Errorf("%s not listed as ignored: %q", k, im.Ignored)
		}
	}
	if !hasLine(im.Ignored, "fsdp_state_dict_type", "reshardable") || !hasLine(im.Mapped, "FULL_SHARD", "stage 3") {
		t.Errorf("reasons: %q / %q", im.Ignored, im.Mapped)
	}
}

// TestImportAccelerateConfigFile: seed 003's Accelerate config points at its ZeRO-2 file: the file is the
// config, with its "auto" bf16 filled from mixed_precision, and num_processes gives the world.
func TestImportAccelerateConfigFile(t *testing.T) {
	im := importFixture(t, "003_accelerate_config_4gpu.yaml")
	if !strings.Contains(im.Kind, "DEEPSPEED") || !strings.HasSuffix(im.DeepSpeedFile, "deepspeed_zero2.json") {
		t.Errorf("kind %q, file %q", im.Kind, im.DeepSpeedFile)
	}
	if im.Launch.NumProcesses != 4 || im.Launch.NumMachines != 1 {
		t.Errorf("launch %+v", im.Launch)
	}
	c := loadImported(t, im, Overrides{MicroBatch: Some(1), GradAccum: Some(2)})
	src, _ := c.Source("bf16.enabled")
	if !c.BF16.Enabled || src.Kind != FromFile || c.ZeRO.Stage != 2 || c.ZeRO.OffloadOptimizer.Device != "cpu" {
		t.Errorf("bf16 %v (%v), stage %d, %+v", c.BF16.Enabled, src, c.ZeRO.Stage, c.ZeRO.OffloadOptimizer)
	}
	if b, _ := c.Resolve(4); b.TrainBatchSize != 8 {
		t.Errorf("seed 003: 4 × 1 × 2 = 8, got %+v", b)
	}
	for _, k := range []string{"compute_environment", "tpu_env", "downcast_bf16", "deepspeed_config.zero3_init_flag"} {
		if !hasLine(im.Ignored, k+": ") {
			t.Errorf("%s not ignored: %q", k, im.Ignored)
		}
	}
}

// TestImportAccelerateInline: the inline deepspeed_config keys map one by one.
func TestImportAccelerateInline(t *testing.T) {
	im := importFixture(t, "accelerate_inline_zero3.yaml")
	c := loadImported(t, im, Overrides{})
	z := c.ZeRO
	if z.Stage != 3 || z.OffloadOptimizer.Device != "cpu" || z.OffloadParam.Device != "cpu" || !z.Stage3Gather16BitWeightsOnModelSave ||
		c.GradientClipping != 1.0 || !c.FP16.Enabled || c.BF16.Enabled || c.GradientAccumulationSteps.V != 2 {
		t.Errorf("inline mapping: %+v clip %g fp16 %v gas %v", z, c.GradientClipping, c.FP16.Enabled, c.GradientAccumulationSteps)
	}
	l := im.Launch
	if l.NumProcesses != 8 || l.NumMachines != 2 || l.MainProcessIP != "10.0.0.1" || l.MainProcessPort != 29600 || l.GPUIDs != "all" {
		t.Errorf("launch %+v", l)
	}
	if !hasLine(im.Ignored, "zero3_init_flag") {
		t.Errorf("ignored %q", im.Ignored)
	}
}

// TestImportAccelerateFSDP: SHARD_GRAD_OP is ZeRO-2; offload_params offloads the optimizer (parameters need
// stage 3); activation checkpointing and bf16 carry over.
func TestImportAccelerateFSDP(t *testing.T) {
	im := importFixture(t, "accelerate_fsdp.yaml")
	c := loadImported(t, im, Overrides{})
	if c.ZeRO.Stage != 2 || c.ZeRO.OffloadOptimizer.Device != "cpu" || c.ZeRO.OffloadParam != nil || !c.ActivationCheckpointing.Present || !c.BF16.Enabled {
		t.Errorf("stage %d %+v %+v ckpt %v bf16 %v", c.ZeRO.Stage, c.ZeRO.OffloadOptimizer, c.ZeRO.OffloadParam, c.ActivationCheckpointing.Present, c.BF16.Enabled)
	}
	if !hasLine(im.Ignored, "fsdp_config.fsdp_auto_wrap_policy") || !hasLine(im.Ignored, "fsdp_config.fsdp_backward_prefetch", "prefetch") {
		t.Errorf("ignored %q", im.Ignored)
	}
}

func TestImportRefusals(t *testing.T) {
	_, err := ImportFile(filepath.Join("testdata", "import", "fsdp_hybrid.yaml"))
	if err == nil || !strings.Contains(err.Error(), "HYBRID_SHARD") || !strings.Contains(err.Error(), "FULL_SHARD (ZeRO-3)") {
		t.Errorf("HYBRID_SHARD: %v", err)
	}
	for _, tc := range []struct{ src, want string }{
		{"distributed_type: TPU\n", "no gotrain equivalent"},
		{"a: 1\n", "neither an Accelerate"},
		{`{"train_micro_batch_size_per_gpu": 1}`, "already a DeepSpeed JSON config"},
		{"distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: missing.json\n", "missing.json"},
		{"fsdp_sharding_strategy: SIDEWAYS\n", "not an FSDP sharding strategy"},
	} {
		_, err := Import("x.yaml", []byte(tc.src), func(string) (string, []byte, error) { return "", nil, errMissing })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.src, err, tc.want)
		}
	}
}

var errMissing = &Error{Msg: "no such file"}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`{"zero_optimization": {"stage": 1}}`, "a DeepSpeed JSON config"},
		{"// comment\n{\"bf16\": {\"enabled\": true}}", "a DeepSpeed JSON config"},
		{"distributed_type: FSDP\n", "an Accelerate config (distributed_type FSDP)"},
		{`{"fsdp_sharding_strategy": "FULL_SHARD"}`, "a PyTorch FSDP config (JSON)"},
		{"sharding_strategy: NO_SHARD\n", "a PyTorch FSDP config (YAML)"},
		{"x: [1, 2]\n", "a YAML file that is neither"},
	} {
		if got := Describe([]byte(tc.src)); !strings.HasPrefix(got, tc.want) {
			t.Errorf("Describe(%q) = %q, want %q", tc.src, got, tc.want)
		}
	}
}

func TestParseYAML(t *testing.T) {
	src := "# c\na: 1\nb: 'no'\nc: \"x # y\"  # comment\nd:\n  e: [1, two, {f: true}]\n  g: {}\nh:\n  - x\n  - 2.5\ni: ~\nj: -0.5e-3\nk: +7\n"
	n, err := parseYAML("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":1,"b":"no","c":"x # y","d":{"e":[1,"two",{"f":true}],"g":{}},"h":["x",2.5],"i":null,"j":-0.0005,"k":7}`
	if got := n.compact(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	for _, bad := range []string{"a: &x 1\n", "a: |\n  text\n", "a: 1\n\tb: 2\n", "a: 1\na: 2\n", "- 1\n", "a: [1, 2\n", "a: 1\n    b: 2\n", "just text\n"} {
		if _, err := parseYAML("bad.yaml", []byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// FuzzImport: any bytes as an Accelerate or FSDP config are converted or refused, never a panic, and a
// conversion always yields a DeepSpeed config that parses.
func FuzzImport(f *testing.F) {
	for _, name := range []string{"002_fsdp_config.json", "003_accelerate_config_4gpu.yaml", "accelerate_inline_zero3.yaml", "accelerate_fsdp.yaml", "fsdp_hybrid.yaml"} {
		b, err := os.ReadFile(filepath.Join("testdata", "import", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("a: {b: [1, {c: 'd''e'}]}\n- x\n"))
	ds := []byte(`{"bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": 1}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = Describe(data)
		im, err := Import("fuzz.yaml", data, func(string) (string, []byte, error) { return "ds.json", ds, nil })
		if err != nil {
			return
		}
		if root, errs := parseTree("converted", im.DeepSpeed); root == nil {
			t.Fatalf("converted config does not parse: %v\n%s", errs, im.DeepSpeed)
		}
	})
}
