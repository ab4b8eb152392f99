package config

import "testing"

func TestDeprecatedMappings(t *testing.T) {
	cases := []struct {
		name    string
		src     string
		check   func(*Config) bool
		warn    string // path of the expected warning
		srcPath string // a key whose source must say deprecated ("" to skip)
	}{
		{"cpu_offload", `{"zero_optimization": {"stage": 2, "cpu_offload": true}}`,
			func(c *Config) bool { return c.ZeRO.OffloadOptimizer != nil && c.ZeRO.OffloadOptimizer.Device == "cpu" },
			"zero_optimization.cpu_offload", "zero_optimization.offload_optimizer.device"},
		{"cpu_offload false", `{"zero_optimization": {"stage": 2, "cpu_offload": false}}`,
			func(c *Config) bool { return c.ZeRO.OffloadOptimizer == nil },
			"zero_optimization.cpu_offload", ""},
		{"cpu_offload_param", `{"zero_optimization": {"stage": 3, "cpu_offload_param": true}}`,
			func(c *Config) bool { return c.ZeRO.OffloadParam != nil && c.ZeRO.OffloadParam.Device == "cpu" },
			"zero_optimization.cpu_offload_param", "zero_optimization.offload_param.device"},
		{"cpu_offload_use_pin_memory is not mapped", `{"zero_optimization": {"stage": 2, "cpu_offload": true, "cpu_offload_use_pin_memory": true}}`,
			func(c *Config) bool { return c.ZeRO.OffloadOptimizer != nil && !c.ZeRO.OffloadOptimizer.PinMemory },
			"zero_optimization.cpu_offload_use_pin_memory", ""},
		{"stage3_gather_fp16_weights_on_model_save", `{"zero_optimization": {"stage": 3, "stage3_gather_fp16_weights_on_model_save": true}}`,
			func(c *Config) bool { return c.ZeRO.Stage3Gather16BitWeightsOnModelSave },
			"zero_optimization.stage3_gather_fp16_weights_on_model_save", "zero_optimization.stage3_gather_16bit_weights_on_model_save"},
		{"bfloat16", `{"bfloat16": {"enabled": true}}`,
			func(c *Config) bool { return c.BF16.Enabled },
			"bfloat16", "bf16.enabled"},
		{"zero_optimization true is stage 1", `{"zero_optimization": true}`,
			func(c *Config) bool { return c.ZeRO.Stage == 1 },
			"zero_optimization", "zero_optimization.stage"},
		{"zero_optimization false is stage 0", `{"zero_optimization": false}`,
			func(c *Config) bool { return c.ZeRO.Stage == 0 },
			"zero_optimization", "zero_optimization.stage"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src[:len(tc.src)-1] + `, "train_micro_batch_size_per_gpu": 1}`
			c := mustParse(t, src, Overrides{})
			if !tc.check(c) {
				t.Errorf("mapping not applied: %+v", c.ZeRO)
			}
			w := warnAt(c.Warnings, tc.warn)
			if w == nil {
				t.Fatalf("no warning at %s: %v", tc.warn, c.Warnings)
			}
			if w.Fix == "" || w.Line == 0 {
				t.Errorf("warning lacks fix or position: %+v", w)
			}
			if tc.srcPath != "" {
				if s, _ := c.Source(tc.srcPath); s.Kind != FromDeprecated {
					t.Errorf("source of %s = %v, want deprecated", tc.srcPath, s)
				}
			}
		})
	}
}

func TestDeprecatedAndReplacementTogether(t *testing.T) {
	cases := []struct{ src, path, old, new string }{
		{`{"zero_optimization": {"stage": 2, "cpu_offload": true, "offload_optimizer": {"device": "cpu"}}}`, "zero_optimization.cpu_offload", "cpu_offload", "offload_optimizer"},
		{`{"zero_optimization": {"stage": 3, "cpu_offload_param": true, "offload_param": {"device": "cpu"}}}`, "zero_optimization.cpu_offload_param", "cpu_offload_param", "offload_param"},
		{`{"zero_optimization": {"stage": 3, "stage3_gather_fp16_weights_on_model_save": true, "stage3_gather_16bit_weights_on_model_save": true}}`,
			"zero_optimization.stage3_gather_fp16_weights_on_model_save", "stage3_gather_fp16_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save"},
		{`{"bfloat16": {"enabled": true}, "bf16": {"enabled": true}}`, "bfloat16", "bfloat16", "bf16"},
	}
	for _, tc := range cases {
		_, es := parseCfg(t, tc.src, Options{Strict: true})
		e := errAt(es, tc.path)
		if e == nil {
			t.Errorf("%s: no error at %s: %v", tc.src, tc.path, es)
			continue
		}
		want := "Cannot provide deprecated parameter '" + tc.old + "' and replacing parameter '" + tc.new + "' together"
		if e.Msg != want || e.Fix == "" || e.File != testFile || e.Line == 0 {
			t.Errorf("got %+v, want message %q with file, position and fix", e, want)
		}
	}
}

func TestAliasSpellings(t *testing.T) {
	c := mustParse(t, `{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, "prefetch_bucket_size": 1234, "max_live_parameters": 99}}`, Overrides{})
	if c.ZeRO.Stage3PrefetchBucketSize != 1234 || c.ZeRO.Stage3MaxLiveParameters != 99 {
		t.Errorf("aliases not read: %+v", c.ZeRO)
	}
	_, es := parseCfg(t, `{"zero_optimization": {"prefetch_bucket_size": 1, "stage3_prefetch_bucket_size": 2}}`, Options{Strict: true})
	if errAt(es, "zero_optimization.prefetch_bucket_size") == nil {
		t.Errorf("both spellings accepted: %v", es)
	}
}
