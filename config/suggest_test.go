package config

import (
	"strings"
	"testing"
)

// TestUnknownKeysAtEveryDepth checks that unknown keys are found in every block, with the closest key.
func TestUnknownKeysAtEveryDepth(t *testing.T) {
	cases := []struct {
		name, src, path, suggestion string
	}{
		{"top level", `{"zero_optimisation": {"stage": 2}}`, "zero_optimisation", "zero_optimization"},
		{"zero block", `{"zero_optimization": {"stage": 2, "overlap_com": true}}`, "zero_optimization.overlap_com", "overlap_comm"},
		{"offload block", `{"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memmory": true}}}`, "zero_optimization.offload_optimizer.pin_memmory", "pin_memory"},
		{"optimizer params", `{"optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "weight_decy": 0.1}}}`, "optimizer.params.weight_decy", "weight_decay"},
		{"scheduler params", `{"scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 10, "cosine_min_ratio": 0.0}}}`, "scheduler.params.cosine_min_ratio", "cos_min_ratio"},
		{"optimizer block", `{"optimizer": {"type": "AdamW", "param": {}}}`, "optimizer.param", "params"},
		{"fp16 block", `{"fp16": {"enabled": true, "loss_scale_windw": 500}}`, "fp16.loss_scale_windw", "loss_scale_window"},
		{"timers nested", `{"timers": {"throughput": {"enabeld": false}}}`, "timers.throughput.enabeld", "enabled"},
		{"monitor", `{"tensorboard": {"enabled": false, "outputpath": "x"}}`, "tensorboard.outputpath", "output_path"},
		{"wrong level", `{"stage": 2}`, "stage", "zero_optimization.stage"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src[:len(tc.src)-1] + `, "train_micro_batch_size_per_gpu": 1}`
			_, es := parseCfg(t, src, Options{Strict: true})
			e := errAt(es, tc.path)
			if e == nil {
				t.Fatalf("no error at %s: %v", tc.path, es)
			}
			if !strings.Contains(e.Msg, "unknown key") || !strings.Contains(e.Msg+e.Fix, tc.suggestion) {
				t.Errorf("got %q / %q, want an unknown-key error suggesting %q", e.Msg, e.Fix, tc.suggestion)
			}
			if e.File != testFile || e.Line != 1 || e.Col == 0 {
				t.Errorf("error lacks file or position: %+v", e)
			}
			// The key's own column: unknown-key errors point at the key, not its value.
			if col := strings.Index(src, `"`+e.Path[strings.LastIndexByte(e.Path, '.')+1:]+`"`) + 1; e.Col != col {
				t.Errorf("column %d, want %d", e.Col, col)
			}

			c, es2 := parseCfg(t, src, Options{Strict: false})
			if errAt(es2, tc.path) != nil {
				t.Errorf("lenient mode still errors: %v", es2)
			}
			if c == nil || warnAt(c.Warnings, tc.path) == nil {
				t.Errorf("lenient mode: no warning at %s", tc.path)
			}
		})
	}
}

func TestOptimizerAndSchedulerTypeNames(t *testing.T) {
	cases := []struct {
		typ, canonical string
		torch, ok      bool
	}{
		{"AdamW", "adamw", false, true},
		{"adamw", "adamw", false, true},
		{"ADAM", "adam", false, true},
		{"OneBitAdam", "onebitadam", false, true},
		{"SGD", "SGD", true, true},
		{"sgd", "", false, false}, // torch names are case-sensitive
		{"RMSprop", "RMSprop", true, true},
		{"Adafactorr", "", false, false},
	}
	for _, tc := range cases {
		c, torch, ok := optimizerKind(tc.typ)
		if c != tc.canonical || torch != tc.torch || ok != tc.ok {
			t.Errorf("optimizerKind(%q) = %q, %v, %v; want %q, %v, %v", tc.typ, c, torch, ok, tc.canonical, tc.torch, tc.ok)
		}
	}
	_, es := parseCfg(t, `{"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "sgd"}}`, Options{Strict: true})
	if e := errAt(es, "optimizer.type"); e == nil || !strings.Contains(e.Msg, "SGD") || !strings.Contains(e.Fix, "case-sensitive") {
		t.Errorf("sgd: got %v", es)
	}
	_, es = parseCfg(t, `{"train_micro_batch_size_per_gpu": 1, "scheduler": {"type": "warmuplr"}}`, Options{Strict: true})
	if e := errAt(es, "scheduler.type"); e == nil || !strings.Contains(e.Msg, "does not recognize LR scheduler") || !strings.Contains(e.Fix, "WarmupLR") {
		t.Errorf("warmuplr: got %v", es)
	}
}

// TestUnknownKeyPolicy: DeepSpeed ignores unknown keys at the top level and in the blocks it reads with
// dict.get, and refuses them in its pydantic blocks and constructor params; gotrain warns in the first case
// (naming the closest key), errs in the second, errs on any likely typo unless --allow-unknown-keys, and then
// warns naming both keys and the value the intended one keeps.
func TestUnknownKeyPolicy(t *testing.T) {
	cases := []struct {
		name, body, path string
		err              bool     // without --allow-unknown-keys
		say              []string // in the message or fix, either way
		allowSay         []string // in the --allow-unknown-keys warning
	}{
		{"top level, no typo", `"my_launcher_setting": 3`, "my_launcher_setting", false,
			[]string{"as DeepSpeed ignores it", "closest known key"}, nil},
		{"lenient block, no typo", `"fp16": {"enabled": false, "my_scale_note": 1}`, "fp16.my_scale_note", false,
			[]string{"as DeepSpeed ignores it"}, nil},
		{"strict block, no typo", `"zero_optimization": {"stage": 2, "zero_new_feature_flag": true}`, "zero_optimization.zero_new_feature_flag", true,
			[]string{"pydantic", "extra=\"forbid\""}, nil},
		{"monitor block, no typo", `"tensorboard": {"enabled": false, "flush_secs": 5}`, "tensorboard.flush_secs", true,
			[]string{"pydantic"}, nil},
		{"optimizer params, no typo", `"optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "foreach": true}}`, "optimizer.params.foreach", true,
			[]string{"keyword arguments"}, nil},
		{"top-level typo", `"gradient_clippin": 1.0`, "gradient_clippin", true,
			[]string{"did you mean gradient_clipping"}, []string{"gradient_clipping keeps its default, 0"}},
		{"lenient-block typo", `"bf16": {"enabeld": true}`, "bf16.enabeld", true,
			[]string{"did you mean enabled"}, []string{"bf16.enabled keeps its default, false"}},
		{"strict-block typo", `"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_sise": 1000}`, "zero_optimization.stage3_prefetch_bucket_sise", true,
			[]string{"did you mean stage3_prefetch_bucket_size"}, []string{"zero_optimization.stage3_prefetch_bucket_size keeps its default, 50000000"}},
		{"params typo", `"scheduler": {"type": "WarmupLR", "params": {"warmup_num_step": 5}}`, "scheduler.params.warmup_num_step", true,
			[]string{"did you mean warmup_num_steps"}, []string{"scheduler.params.warmup_num_steps keeps its default, 1000"}},
		{"typo beside the right key", `"fp16": {"enabled": false, "enabeld": true}`, "fp16.enabeld", true,
			[]string{"did you mean enabled"}, []string{"fp16.enabled is set in the file"}},
		{"misplaced key", `"offload_optimizer": {"device": "cpu"}`, "offload_optimizer", true,
			[]string{"belongs in zero_optimization"}, []string{"ignored here"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := `{"train_micro_batch_size_per_gpu": 1, ` + tc.body + "}"
			c, es := parseCfg(t, src, Options{Strict: true})
			var text string
			if e := errAt(es, tc.path); e != nil {
				if !tc.err {
					t.Fatalf("error, want a warning: %v", e)
				}
				text = e.Error()
			} else {
				if tc.err {
					t.Fatalf("no error at %s: %v %v", tc.path, es, c.Warnings)
				}
				w := warnAt(c.Warnings, tc.path)
				if w == nil {
					t.Fatalf("neither error nor warning at %s", tc.path)
				}
				text = w.String()
			}
			containsAll(t, "message", text, tc.say...)

			c, es = parseCfg(t, src, Options{Strict: false})
			if errAt(es, tc.path) != nil {
				t.Fatalf("--allow-unknown-keys still errs: %v", es)
			}
			w := warnAt(c.Warnings, tc.path)
			if w == nil {
				t.Fatalf("--allow-unknown-keys: no warning at %s", tc.path)
			}
			containsAll(t, "warning", w.String(), append(tc.allowSay, tc.path)...)
		})
	}
}
