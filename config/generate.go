package config

import (
	"fmt"
	"strconv"
	"strings"
)

// GenerateOptions selects what Generate writes, mirroring the flags of seed 002's generator:
// --zero_stage N [--offload_optimizer] [--offload_param] [--bf16|--fp16] [--gradient_accumulation_steps N].
type GenerateOptions struct {
	ZeroStage        int
	OffloadOptimizer bool   // optimizer states and master weights on the CPU (stages 1–3)
	OffloadParam     bool   // parameters on the CPU (stage 3 only)
	Precision        string // "", "fp32", "bf16" or "fp16"
	GradAccum        int    // 0: "auto" (filled from the train flags)
}

// Generate writes a DeepSpeed config for opts, shaped like seed 002's example: the micro batch, gradient
// clipping and the stage-3 bucket sizes are "auto" so the train flags and the model fill them, the precision
// block is explicit, and the ZeRO block spells out its communication settings. The result always validates
// (Generate checks it with Parse before returning it).
func Generate(opts GenerateOptions) ([]byte, error) {
	var bad []string
	if opts.ZeroStage < 0 || opts.ZeroStage > 3 {
		bad = append(bad, fmt.Sprintf("ZeRO stage %d does not exist (use 0, 1, 2 or 3)", opts.ZeroStage))
	}
	if opts.OffloadOptimizer && opts.ZeroStage == 0 {
		bad = append(bad, "optimizer offload needs ZeRO stage 1, 2 or 3")
	}
	if opts.OffloadParam && opts.ZeroStage != 3 {
		bad = append(bad, "parameter offload needs ZeRO stage 3")
	}
	if opts.Precision != "" && !containsString(validPrecisions(), opts.Precision) {
		bad = append(bad, fmt.Sprintf("precision %q is not one of fp32, bf16, fp16", opts.Precision))
	}
	if opts.GradAccum < 0 {
		bad = append(bad, fmt.Sprintf("gradient accumulation steps %d must be positive", opts.GradAccum))
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("generate DeepSpeed config: %s", strings.Join(bad, "; "))
	}

	root := &jsonObject{}
	root.add("train_micro_batch_size_per_gpu", "auto")
	if opts.GradAccum > 0 {
		root.add("gradient_accumulation_steps", opts.GradAccum)
	} else {
		root.add("gradient_accumulation_steps", "auto")
	}
	root.add("gradient_clipping", "auto")
	switch opts.Precision {
	case "bf16":
		root.add("bf16", (&jsonObject{}).add("enabled", true))
	case "fp16":
		root.add("fp16", (&jsonObject{}).add("enabled", true).add("loss_scale", 0).add("loss_scale_window", 1000).
			add("initial_scale_power", 16).add("hysteresis", 2).add("min_loss_scale", 1))
	}
	z := (&jsonObject{}).add("stage", opts.ZeroStage)
	switch opts.ZeroStage {
	case 1:
		z.add("reduce_bucket_size", 500000000).add("allgather_bucket_size", 500000000)
	case 2:
		z.add("contiguous_gradients", true).add("overlap_comm", true).add("reduce_scatter", true).
			add("reduce_bucket_size", 500000000).add("allgather_bucket_size", 500000000)
	case 3:
		z.add("contiguous_gradients", true).add("overlap_comm", true).
			add("reduce_bucket_size", "auto").add("stage3_prefetch_bucket_size", "auto").
			add("stage3_param_persistence_threshold", "auto").add("stage3_max_live_parameters", 1000000000).
			add("stage3_max_reuse_distance", 1000000000).add("sub_group_size", 1000000000).
			add("stage3_gather_16bit_weights_on_model_save", true)
	}
	if opts.OffloadOptimizer {
		z.add("offload_optimizer", (&jsonObject{}).add("device", "cpu").add("pin_memory", true))
	}
	if opts.OffloadParam {
		z.add("offload_param", (&jsonObject{}).add("device", "cpu").add("pin_memory", true))
	}
	root.add("zero_optimization", z)

	var sb strings.Builder
	writeJSON(&sb, root, 0)
	sb.WriteByte('\n')
	out := []byte(sb.String())
	if _, err := Parse("generated", out, Options{Strict: true}); err != nil {
		return nil, fmt.Errorf("generate DeepSpeed config: the generated file does not validate: %w", err)
	}
	return out, nil
}

// jsonObject is an object that keeps its keys in insertion order, so generated files read top-down like the
// hand-written ones in the seeds.
type jsonObject struct {
	keys []string
	vals []any // string, bool, int, *jsonObject
}

func (o *jsonObject) add(k string, v any) *jsonObject {
	o.keys = append(o.keys, k)
	o.vals = append(o.vals, v)
	return o
}

func writeJSON(sb *strings.Builder, v any, indent int) {
	switch x := v.(type) {
	case string:
		sb.WriteString(quoteJSON(x))
	case bool:
		sb.WriteString(strconv.FormatBool(x))
	case int:
		sb.WriteString(strconv.Itoa(x))
	case *jsonObject:
		sb.WriteString("{\n")
		for i, k := range x.keys {
			sb.WriteString(strings.Repeat("  ", indent+1))
			sb.WriteString(quoteJSON(k))
			sb.WriteString(": ")
			writeJSON(sb, x.vals[i], indent+1)
			if i < len(x.keys)-1 {
				sb.WriteByte(',')
			}
			sb.WriteByte('\n')
		}
		sb.WriteString(strings.Repeat("  ", indent))
		sb.WriteByte('}')
	}
}
