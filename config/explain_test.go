package config

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestExplainMarksOrigins(t *testing.T) {
	src := `{
  "train_batch_size": 64,
  "gradient_accumulation_steps": "auto",
  "optimizer": {"type": "AdamW", "params": {"lr": "auto"}},
  "bfloat16": {"enabled": true},
  "zero_optimization": {"stage": 2, "cpu_offload": true, "sub_group_size": "auto"},
  "wandb": {"enabled": true}
}`
	c := mustParse(t, src, Overrides{LR: Some(3e-4)})
	var out bytes.Buffer
	if err := Explain(&out, c, 4, 512); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	// 64 = micro × 1 × 4 → micro 16 inferred; tokens = 64 × 512.
	for _, want := range []string{
		"train_micro_batch_size_per_gpu ", "16  (inferred by DeepSpeed's rules)",
		"gradient_accumulation_steps ", "1  (auto: Hugging Face default gradient_accumulation_steps=1)",
		"tokens_per_step ", "32768  (train_batch_size × seq_len 512)",
		"params.lr ", "0.0003  (auto: learning rate=0.0003)",
		"params.eps ", "1e-08  (default)",
		"enabled ", "true  (deprecated bfloat16)",
		"offload_optimizer.device ", "cpu  (deprecated zero_optimization.cpu_offload)",
		"overlap_comm ", "false  (inferred: true for stage 3, false otherwise)",
		"sub_group_size ", "1000000000  (auto: DeepSpeed default)",
		"enabled ", "true  [not supported]",
		"wall_clock_breakdown ", "[ignored by gotrain]",
		"not supported, no effect ", "wandb.enabled=true",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("explain output lacks %q", want)
		}
	}
	if strings.Contains(s, "gradient_clipping ........................ 0  (default) [not supported]") {
		t.Error("a default value is flagged as not supported")
	}
}

func TestExplainBatchErrorAndWriterError(t *testing.T) {
	c := mustParse(t, `{"train_batch_size": 10, "train_micro_batch_size_per_gpu": 3}`, Overrides{})
	if err := Explain(&bytes.Buffer{}, c, 1, 0); err == nil {
		t.Error("Explain succeeded on an impossible batch")
	}
	c = mustParse(t, `{"train_micro_batch_size_per_gpu": 3}`, Overrides{})
	boom := errors.New("disk full")
	if err := Explain(failWriter{boom}, c, 1, 0); !errors.Is(err, boom) {
		t.Errorf("writer error not returned: %v", err)
	}
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

func TestKeysMarkdown(t *testing.T) {
	md := KeysMarkdown()
	for _, s := range keyTable() {
		if !strings.Contains(md, "| `"+s.path) {
			t.Errorf("keys table lacks %s", s.path)
		}
	}
	for _, want := range []string{
		"| `zero_optimization.stage3_prefetch_bucket_size` | `5e7` | supported |",
		"| `gradient_clipping` | `0` | supported |",
		"| `zero_optimization.offload_optimizer` | None | supported |",
		"| `wandb.enabled` | `false` | not supported |",
		"| `zero_optimization.elastic_checkpoint` | `false` | accepted, ignored |",
		"| `zero_optimization.stage3_model_persistence_threshold` | `sys.maxsize` |",
		"| `scheduler.params.cos_min_ratio (WarmupCosineLR)` | `0.0001` |",
		"| `optimizer.params.adam_w_mode (Adam, AdamW)` | `true` |",
		"| `bfloat16` | | deprecated, mapped with a warning |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("keys table lacks %q", want)
		}
	}
	for i, l := range strings.Split(strings.TrimSpace(md), "\n") {
		if n := strings.Count(strings.ReplaceAll(l, `\|`, ""), "|"); n != 5 {
			t.Errorf("line %d has %d cell separators: %s", i+1, n, l)
		}
	}
}
