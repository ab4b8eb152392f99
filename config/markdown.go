package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// KeysMarkdown renders the table of every key gotrain knows (key path, DeepSpeed code default, gotrain status,
// notes) as Markdown, for docs/deepspeed-keys.md. It comes from the same table that drives parsing, so the two cannot
// drift apart. Optimizer and scheduler parameters are listed for the types gotrain runs.
func KeysMarkdown() string {
	var sb strings.Builder
	sb.WriteString("| key | default | status | notes |\n|---|---|---|---|\n")
	row := func(path string, def any, kind kind, optional bool, st string, note string) {
		d := markdownDefault(def, kind, optional)
		fmt.Fprintf(&sb, "| `%s` | %s | %s | %s |\n", path, d, st, strings.ReplaceAll(note, "|", "\\|"))
	}
	for _, s := range keyTable() {
		note := s.note
		if s.hf != hfNone {
			note = joinNote(note, "accepts \"auto\"")
		}
		if len(s.aliases) > 0 {
			note = joinNote(note, "also spelled "+strings.Join(s.aliases, ", "))
		}
		if len(s.enum) > 0 {
			note = joinNote(note, "one of "+strings.Join(s.enum, ", "))
		}
		switch s.path {
		case "optimizer.params":
			row(s.path, nil, kindBlock, false, s.status.String(), note)
			for _, p := range optimizerParams("adamw", false) {
				row("optimizer.params."+p.name()+" (Adam, AdamW)", p.def, p.kind, false, p.status.String(), paramNote(p))
			}
			continue
		case "scheduler.params":
			row(s.path, nil, kindBlock, false, s.status.String(), note)
			for _, typ := range dsSchedulerNames() {
				for _, p := range schedulerParams(typ) {
					row("scheduler.params."+p.name()+" ("+typ+")", p.def, p.kind, false, p.status.String(), paramNote(p))
				}
			}
			continue
		}
		row(s.path, s.def, s.kind, s.optional, s.status.String(), note)
	}
	for _, dep := range []struct{ old, new string }{
		{"bfloat16", "bf16"},
		{"zero_optimization: true/false", "zero_optimization.stage 1/0"},
		{"zero_optimization.cpu_offload", "zero_optimization.offload_optimizer.device \"cpu\""},
		{"zero_optimization.cpu_offload_param", "zero_optimization.offload_param.device \"cpu\""},
		{"zero_optimization.stage3_gather_fp16_weights_on_model_save", "zero_optimization.stage3_gather_16bit_weights_on_model_save"},
	} {
		fmt.Fprintf(&sb, "| `%s` | | deprecated, mapped with a warning | read as `%s` |\n", dep.old, dep.new)
	}
	sb.WriteString("| `zero_optimization.cpu_offload_use_pin_memory` | | deprecated, not mapped (warning) | write `pin_memory` in the offload blocks |\n")
	return sb.String()
}

func paramNote(p paramSpec) string {
	note := p.note
	if p.required {
		note = joinNote(note, "required")
	}
	if p.hf != hfNone {
		note = joinNote(note, "accepts \"auto\"")
	}
	if len(p.enum) > 0 {
		note = joinNote(note, "one of "+strings.Join(p.enum, ", "))
	}
	return note
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func markdownDefault(def any, k kind, optional bool) string {
	switch k {
	case kindBlock:
		if optional {
			return "None"
		}
		return ""
	case kindRawBlock, kindAny:
		return "None"
	}
	if i, ok := def.(int64); ok {
		if i == math.MaxInt64 {
			return "`sys.maxsize`"
		}
		return "`" + humanInt(i) + "`"
	}
	return "`" + formatValue(def) + "`"
}

// humanInt writes round sizes the way DeepSpeed configs do (5e8), other integers in full.
func humanInt(i int64) string {
	if i >= 1000000 && i%100000 == 0 {
		m, e := i, 0
		for m%10 == 0 {
			m, e = m/10, e+1
		}
		return strconv.FormatInt(m, 10) + "e" + strconv.Itoa(e)
	}
	return strconv.FormatInt(i, 10)
}
