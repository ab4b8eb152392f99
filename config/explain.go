package config

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// formatValue renders a resolved value the way DeepSpeed's config dump does: plain numbers, unquoted strings,
// None for unset.
func formatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case string:
		if x == "" {
			return `""`
		}
		return x
	case []float64:
		parts := make([]string, len(x))
		for i, f := range x {
			parts[i] = strconv.FormatFloat(f, 'g', -1, 64)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case []string:
		return "[" + quoteList(x) + "]"
	case *node:
		return x.compact()
	}
	return fmt.Sprint(v)
}

// explainWidth is the column where values start, as in DeepSpeed's "  key ........ value" dump.
const explainWidth = 44

// explainLine writes one "  key ...... value  (origin) [status]" line.
func explainLine(w io.Writer, key, value, mark string) error {
	dots := explainWidth - len(key) - 3
	if dots < 3 {
		dots = 3
	}
	line := fmt.Sprintf("  %s %s %s", key, strings.Repeat(".", dots), value)
	if mark != "" {
		line += "  " + mark
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

// mark describes where a value came from and, for keys gotrain does not act on, says so. A not-supported
// key is only flagged when its value asks for the feature (differs from the default).
func mark(e *entry, st Status, def any) string {
	var parts []string
	if e != nil && e.src.Kind != FromFile && e.src.Kind != FromRunTime {
		parts = append(parts, "("+e.src.String()+")")
	}
	switch {
	case st == Ignored:
		parts = append(parts, "[ignored by gotrain]")
	case st == NotSupported && (e == nil || !sameValue(e.v, def)):
		parts = append(parts, "[not supported]")
	}
	return strings.Join(parts, " ")
}

// ExplainOptions say what Explain prints besides the resolved keys.
type ExplainOptions struct {
	// WorldSize is the number of data-parallel ranks the batch sizes are resolved for; 0 leaves it to the
	// run, and the batch sizes that depend on it read "filled at run time".
	WorldSize int
	SeqLen    int // > 0: the tokens per optimizer step too
	// NonDefault prints only the keys whose value is not DeepSpeed's default (the batch sizes, the
	// optimizer, the scheduler and the summary are always printed).
	NonDefault bool
	// Checkpointing is the run's --gradient-checkpointing: activation checkpointing without a config block.
	Checkpointing bool
	// Trained says what the run trains, for the summary ("LoRA adapters ..."); "" prints nothing.
	Trained string
}

// Explain writes every resolved value of c, grouped by block, with the batch sizes DeepSpeed would derive for
// worldSize data-parallel ranks and, when seqLen > 0, the tokens per optimizer step; ExplainWith says more.
func Explain(w io.Writer, c *Config, worldSize, seqLen int) error {
	return ExplainWith(w, c, ExplainOptions{WorldSize: worldSize, SeqLen: seqLen})
}

// ExplainWith writes every resolved value of c (or, with o.NonDefault, those that differ from DeepSpeed's
// defaults), grouped by block, with the batch sizes for o.WorldSize ranks, then a summary in words. Each value
// is marked with its origin when it did not come from the file as written: a default, "auto", a deprecated
// key, or an inference. Values only the run knows (an "auto" total_num_steps without a run length, bucket
// sizes without the model) read "auto → filled at run time from ...". c must come from Load or Parse. The
// error is the batch resolution's, or the writer's.
func ExplainWith(w io.Writer, c *Config, o ExplainOptions) error {
	worldSize := o.WorldSize
	var b Batch
	if worldSize > 0 {
		var err error
		if b, err = c.Resolve(worldSize); err != nil {
			return err
		}
	}
	ew := &errWriter{w: w}
	tab := newTableIndex(keyTable())

	if worldSize > 0 {
		ew.printf("DeepSpeed config %s for a data-parallel world size of %d\n", fileOf(c.File), worldSize)
	} else {
		ew.printf("DeepSpeed config %s; the data-parallel world size is the run's (give --nproc N to resolve the batch sizes)\n", fileOf(c.File))
	}
	if o.NonDefault {
		ew.printf("(only values that differ from DeepSpeed's defaults; unmarked values are written in the file)\n\n")
	} else {
		ew.printf("(unmarked values are written in the file)\n\n")
	}

	ew.printf("batch\n")
	if worldSize > 0 {
		explainBatch(ew, c, b, o.SeqLen)
	} else {
		explainBatchAtRunTime(ew, c)
	}
	explainKeys(ew, c, tab, o.NonDefault)
	explainSummary(ew, c, b, o)
	return ew.err
}

// isDefault reports whether e holds its key's DeepSpeed default def: the key is absent from the file, or
// written with that value.
func isDefault(e *entry, def any) bool {
	switch {
	case e == nil || e.src.Kind == FromDefault:
		return true
	case e.src.Kind == FromFile:
		return sameValue(e.v, def)
	}
	return false
}

// blockChanged reports whether any key under path holds a value other than its default.
func blockChanged(c *Config, tab *tableIndex, path string) bool {
	for _, i := range tab.children[path] {
		s := tab.specs[i]
		if s.kind == kindBlock {
			if blockChanged(c, tab, s.path) {
				return true
			}
			continue
		}
		if !isDefault(c.entries[s.path], s.def) {
			return true
		}
	}
	return false
}

// explainBatch prints the batch triangle resolved for b.WorldSize ranks.
func explainBatch(ew *errWriter, c *Config, b Batch, seqLen int) {
	worldSize := b.WorldSize
	inferred := map[string]bool{}
	for _, k := range b.Inferred {
		inferred[k] = true
	}
	for _, k := range []struct {
		path string
		v    int
	}{{keyMicro, b.MicroBatch}, {keyGAS, b.GradAccum}} {
		m := mark(c.entries[k.path], Supported, nil)
		if inferred[k.path] {
			m = "(inferred by DeepSpeed's rules)"
		}
		ew.line(k.path, strconv.Itoa(k.v), m)
	}
	ew.line("world_size", strconv.Itoa(worldSize), "(data-parallel ranks, --nproc)")
	tbsMark := mark(c.entries[keyTBS], Supported, nil)
	if inferred[keyTBS] {
		tbsMark = "(inferred: micro × gas × world size)"
	}
	ew.line(keyTBS, strconv.Itoa(b.TrainBatchSize), tbsMark)
	if seqLen > 0 {
		ew.line("tokens_per_step", strconv.Itoa(mulSat(b.TrainBatchSize, seqLen)), fmt.Sprintf("(train_batch_size × seq_len %d)", seqLen))
	}
}

// explainBatchAtRunTime prints the batch triangle when the number of ranks is the run's: what the file fixes,
// and how the run fills the rest.
func explainBatchAtRunTime(ew *errWriter, c *Config) {
	ranks := "the number of ranks (gotrain launch --nproc, WORLD_SIZE)"
	tbs, micro, gas := c.TrainBatchSize, c.TrainMicroBatchSizePerGPU, c.GradientAccumulationSteps
	show := func(path string, v Opt[int], missing string) {
		if x, ok := v.Get(); ok {
			ew.line(path, strconv.Itoa(x), mark(c.entries[path], Supported, nil))
			return
		}
		ew.line(path, missing, "")
	}
	show(keyMicro, micro, "auto → filled at run time: train_batch_size ÷ (gradient_accumulation_steps × world_size)")
	gasMissing := "auto → filled at run time: train_batch_size ÷ (micro batch × world_size)"
	if !tbs.Set && !c.tbsAuto.Set {
		gasMissing = "1  (DeepSpeed's inference without train_batch_size)"
	}
	show(keyGAS, gas, gasMissing)
	ew.line("world_size", "auto → filled at run time from "+ranks, "")
	if tbs.Set && !c.tbsAuto.Set {
		show(keyTBS, tbs, "")
	} else if c.tbsAuto.Set {
		ew.line(keyTBS, "auto → filled at run time: micro batch × gradient_accumulation_steps × world_size", "")
	} else {
		ew.line(keyTBS, "inferred at run time: micro batch × gradient_accumulation_steps × world_size", "")
	}
}

// explainKeys prints every key of the table outside the batch triangle, block by block; with nonDefault,
// only those whose value is not the default.
func explainKeys(ew *errWriter, c *Config, tab *tableIndex, nonDefault bool) {
	var top []keySpec
	for _, s := range tab.specs {
		if s.parent() != "" || s.kind == kindBlock || s.kind == kindRawBlock || s.kind == kindAny ||
			s.path == keyTBS || s.path == keyMicro || s.path == keyGAS || nonDefault && isDefault(c.entries[s.path], s.def) {
			continue
		}
		top = append(top, s)
	}
	if len(top) > 0 {
		ew.printf("\ntraining\n")
	}
	for _, s := range top {
		e := c.entries[s.path]
		ew.line(s.path, valueOf(e), mark(e, s.status, s.def))
	}

	explainOptimizer(ew, c)
	explainScheduler(ew, c)

	for _, s := range tab.specs {
		if s.parent() != "" || (s.kind != kindBlock && s.kind != kindRawBlock && s.kind != kindAny) ||
			s.path == "optimizer" || s.path == "scheduler" {
			continue
		}
		if s.kind != kindBlock {
			// Raw blocks are listed only when the file has them.
			if e := c.entries[s.path]; e != nil && e.given {
				ew.printf("\n%s\n", s.path)
				ew.line("(as written)", valueOf(e), mark(nil, s.status, nil))
			}
			continue
		}
		if nonDefault && !blockChanged(c, tab, s.path) {
			continue
		}
		ew.printf("\n%s\n", s.path)
		explainBlock(ew, c, tab, s.path, s.path, nonDefault)
	}
}

// explainBlock prints the keys under path, with names relative to top; with nonDefault, only those whose
// value is not the default.
func explainBlock(ew *errWriter, c *Config, tab *tableIndex, path, top string, nonDefault bool) {
	for _, i := range tab.children[path] {
		s := tab.specs[i]
		rel := strings.TrimPrefix(s.path, top+".")
		e := c.entries[s.path]
		if nonDefault && (s.kind == kindBlock && !blockChanged(c, tab, s.path) || s.kind != kindBlock && isDefault(e, s.def)) {
			continue
		}
		if s.kind == kindBlock {
			if s.optional && (e == nil || !e.given || !childDecoded(c, tab, s.path)) {
				ew.line(rel, "None", mark(e, Supported, nil))
				continue
			}
			if e != nil && e.src.Kind == FromDeprecated {
				ew.line(rel, "(block)", mark(e, Supported, nil))
			}
			explainBlock(ew, c, tab, s.path, top, nonDefault)
			continue
		}
		ew.line(rel, valueOf(e), mark(e, s.status, s.def))
	}
}

// childDecoded reports whether an optional block's keys were decoded (it was given as an object).
func childDecoded(c *Config, tab *tableIndex, path string) bool {
	kids := tab.children[path]
	if len(kids) == 0 {
		return false
	}
	_, ok := c.entries[tab.specs[kids[0]].path]
	return ok
}

func valueOf(e *entry) string {
	if e == nil {
		return "None"
	}
	if e.src.Kind == FromRunTime {
		// Its value here is only what the checks assumed; the run decides.
		return e.src.String()
	}
	return formatValue(e.v)
}

func explainOptimizer(ew *errWriter, c *Config) {
	o := c.Optimizer
	ew.printf("\noptimizer\n")
	if o.Default {
		src := Source{Kind: FromGotrain, Note: "no optimizer block; AdamW from the train flags or Hugging Face defaults"}
		ew.line("type", "AdamW", "("+src.String()+")")
		ew.line("params.lr", formatValue(o.LR), "")
		ew.line("params.betas", formatValue([]float64{o.Betas[0], o.Betas[1]}), "")
		ew.line("params.eps", formatValue(o.Eps), "")
		ew.line("params.weight_decay", formatValue(o.WeightDecay), "")
	} else {
		status := Supported
		if !o.Supported {
			status = NotSupported
		}
		ew.line("type", o.Written, mark(nil, status, nil))
		explainParams(ew, c, "optimizer.params")
		if o.LegacyFusion {
			ew.line("legacy_fusion", "true", mark(c.entries["optimizer.legacy_fusion"], Ignored, false))
		}
	}
	if o.Supported {
		mode := "AdamW: decoupled weight decay"
		if !o.AdamWMode {
			mode = "Adam: L2 weight decay added to the gradient (adam_w_mode false)"
		}
		ew.line("(effective)", mode, "")
	}
}

func explainScheduler(ew *errWriter, c *Config) {
	ew.printf("\nscheduler\n")
	s := c.Scheduler
	if s == nil {
		ew.line("type", "None", "(no scheduler block: constant learning rate)")
		return
	}
	status := Supported
	if !s.Supported {
		status = NotSupported
	}
	if s.HF {
		for _, k := range []string{"type", "params.warmup_num_steps", "params.total_num_steps"} {
			e := c.entries["scheduler."+k]
			ew.line(k, valueOf(e), mark(e, Supported, nil))
		}
		return
	}
	ew.line("type", s.Type, mark(nil, status, nil))
	if s.Torch {
		for _, k := range sortedKeys(s.Raw) {
			ew.line("params."+k, formatValue(s.Raw[k]), "[not supported]")
		}
		return
	}
	explainParams(ew, c, "scheduler.params")
}

func explainParams(ew *errWriter, c *Config, path string) {
	for _, p := range c.params[path] {
		full := path + "." + p.name()
		e := c.entries[full]
		ew.line("params."+p.name(), valueOf(e), mark(e, p.status, p.def))
	}
}

// explainSummary states in words what the run will do.
func explainSummary(ew *errWriter, c *Config, b Batch, o ExplainOptions) {
	ew.printf("\nsummary\n")
	prec := "fp32"
	switch {
	case c.BF16.Enabled:
		prec = "bf16 (fp32 master weights)"
	case c.FP16.Enabled && c.FP16.LossScale == 0:
		prec = fmt.Sprintf("fp16 with dynamic loss scaling from 2^%d", c.FP16.InitialScalePower)
	case c.FP16.Enabled:
		prec = fmt.Sprintf("fp16 with static loss scale %g", c.FP16.LossScale)
	}
	ew.line("precision", prec, precisionMark(c))
	z := c.ZeRO
	what := map[int]string{0: "off: every rank holds everything", 1: "optimizer states partitioned", 2: "optimizer states and gradients partitioned", 3: "optimizer states, gradients and parameters partitioned"}[z.Stage]
	ranks := fmt.Sprintf("%d ranks", b.WorldSize)
	if b.WorldSize == 0 {
		ranks = "the run's ranks"
	}
	ew.line("zero", fmt.Sprintf("stage %d, %s over %s", z.Stage, what, ranks), "")
	if oo := z.OffloadOptimizer; oo != nil && oo.Device != "none" {
		ew.line("offload", "optimizer states and master weights on "+oo.Device, "")
	}
	if op := z.OffloadParam; op != nil && op.Device != "none" {
		ew.line("offload", "parameters on "+op.Device, "")
	}
	clip := "off"
	if c.GradientClipping > 0 {
		clip = fmt.Sprintf("global norm %g", c.GradientClipping)
	}
	ew.line("gradient clipping", clip, "")
	switch ac := c.ActivationCheckpointing; {
	case ac.Present:
		ew.line("activation checkpointing", "on", "(activation_checkpointing block)")
	case o.Checkpointing:
		ew.line("activation checkpointing", "on", "(--gradient-checkpointing)")
	default:
		ew.line("activation checkpointing", "off", "")
	}
	if o.Trained != "" {
		ew.line("trained", o.Trained, "")
	}
	if b.WorldSize > 0 {
		ew.line("samples per optimizer step", strconv.Itoa(b.TrainBatchSize), fmt.Sprintf("(%d × %d × %d)", b.MicroBatch, b.GradAccum, b.WorldSize))
	} else {
		ew.line("samples per optimizer step", "micro batch × gradient accumulation × world size, at run time", "")
	}
	if list := c.Unsupported(); len(list) > 0 {
		sort.Strings(list)
		ew.line("not supported, no effect", strings.Join(list, ", "), "")
	}
}

// precisionMark is where the run's precision came from when "auto" decided it: the flag, or Hugging Face's
// default for want of one.
func precisionMark(c *Config) string {
	keys := []string{"bf16.enabled", "fp16.enabled"}
	if c.FP16.Enabled {
		keys = keys[1:]
	}
	for _, k := range keys {
		if e := c.entries[k]; e != nil && (e.src.Kind == FromAutoOverride || e.src.Kind == FromAutoHFDefault) {
			return "(" + e.src.String() + ")"
		}
	}
	return ""
}

// errWriter remembers the first write error so that Explain can print without checking every line.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

func (e *errWriter) line(key, value, mark string) {
	if e.err == nil {
		e.err = explainLine(e.w, key, value, mark)
	}
}
