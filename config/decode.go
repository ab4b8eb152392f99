package config

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// entry is one resolved key: its value, where it came from, and where it is written.
type entry struct {
	v     any // bool, int64, float64, string, []float64, []string, *node (raw); nil: None or an absent block
	src   Source
	hf    hfKey
	given bool // the key appears in the file (with a value or "auto")
	line  int
	col   int
}

// autoKey is a key written as "auto" that Hugging Face fills from TrainingArguments.
type autoKey struct {
	path string
	spec keySpec
	n    *node
}

// decoder walks the parsed tree against the key table and collects values, errors and warnings.
type decoder struct {
	file    string
	opts    Options
	tab     *tableIndex
	ents    map[string]*entry
	errs    Errors
	warns   []Warning
	autos   []autoKey
	depFrom map[string]string // new key path → the deprecated path it was written as
	params  map[string][]paramSpec
	read    map[string]bool // paths read while building the typed Config (a test checks every key is read)
	hfSched *Scheduler      // the Hugging Face schedule Overrides.LRScheduler builds; nil: none
}

func newDecoder(file string, opts Options) *decoder {
	return &decoder{
		file:    file,
		opts:    opts,
		tab:     newTableIndex(keyTable()),
		ents:    map[string]*entry{},
		depFrom: map[string]string{},
		params:  map[string][]paramSpec{},
		read:    map[string]bool{},
	}
}

func join(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func (d *decoder) errAt(line, col int, path, msg, fix string) {
	d.errs = append(d.errs, &Error{File: d.file, Path: path, Line: line, Col: col, Msg: msg, Fix: fix})
}

func (d *decoder) errNode(n *node, path, msg, fix string) {
	line, col := 0, 0
	if n != nil {
		line, col = n.line, n.col
	}
	d.errAt(line, col, path, msg, fix)
}

func (d *decoder) warnAt(line, col int, path, msg, fix string) {
	d.warns = append(d.warns, Warning{File: d.file, Path: path, Line: line, Col: col, Msg: msg, Fix: fix})
}

func (d *decoder) warnNode(n *node, path, msg, fix string) {
	line, col := 0, 0
	if n != nil {
		line, col = n.line, n.col
	}
	d.warnAt(line, col, path, msg, fix)
}

// fileSource is the origin of a value written in the file: plain, or mapped from a deprecated name.
func (d *decoder) fileSource(path string) Source {
	for p := path; p != ""; p = parentPath(p) {
		if old, ok := d.depFrom[p]; ok {
			return Source{Kind: FromDeprecated, Note: old}
		}
	}
	return Source{Kind: FromFile}
}

func parentPath(p string) string {
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

func (d *decoder) put(path string, v any, src Source, n *node, hf hfKey) {
	e := &entry{v: v, src: src, hf: hf}
	if n != nil {
		e.given, e.line, e.col = true, n.line, n.col
	}
	d.ents[path] = e
}

// block decodes the keys of the object n (nil when the block is absent) found under path. strict says the
// block is a pydantic model in DeepSpeed: there, "auto" means "use the default" (§1.1).
func (d *decoder) block(path string, n *node, strict bool) {
	if n != nil {
		d.applyAliases(path, n)
		d.checkUnknown(path, n, d.tab.childNames(path), "")
	}
	for _, i := range d.tab.children[path] {
		s := d.tab.specs[i]
		d.key(s, n.get(s.name()), strict)
	}
}

// applyAliases renames alternative spellings DeepSpeed accepts to the table's name.
func (d *decoder) applyAliases(path string, n *node) {
	for _, i := range d.tab.children[path] {
		s := d.tab.specs[i]
		for _, a := range s.aliases {
			av := n.get(a)
			if av == nil {
				continue
			}
			at := n.keyPos(a)
			if n.get(s.name()) != nil {
				d.errAt(at.line, at.col, join(path, a),
					fmt.Sprintf("%q and %q name the same setting and both are given", a, s.name()),
					fmt.Sprintf("keep only %q", s.name()))
				n.remove(a)
				continue
			}
			n.rename(a, s.name())
		}
	}
}

// checkUnknown reports keys of n that are not in names.
func (d *decoder) checkUnknown(path string, n *node, names []string, context string) {
	known := map[string]bool{}
	for _, k := range names {
		known[k] = true
	}
	for i, k := range n.keys {
		if !known[k] {
			d.unknownKey(path, k, n.kpos[i], names, context, n)
		}
	}
}

// unknownKey reports one unknown key under the policy in doc.go: a likely typo (a known key within a small edit
// distance) or a key that belongs in another block is an error, and so is any unknown key in a section DeepSpeed
// itself validates strictly; any other unknown key is a warning naming the closest known key, as DeepSpeed
// ignores it. With --allow-unknown-keys (Options.Strict false) every one is a warning, and a typo's warning names
// both keys and the value the intended key falls back to.
func (d *decoder) unknownKey(parent, key string, at pos, candidates []string, context string, n *node) {
	path := join(parent, key)
	msg := "unknown key"
	if context != "" {
		msg += " for " + context
	}
	var fix string
	// A known key written at the wrong level is a better diagnosis than the nearest name at this one.
	sug, elsewhere := "", d.findElsewhere(key, parent)
	if elsewhere == "" {
		sug = suggest(key, candidates)
	}
	strict, why := d.strictSection(parent)
	switch {
	case sug != "" && !d.opts.Strict:
		msg += fmt.Sprintf(" (ignored); did you mean %s? %s", sug, d.fallback(join(parent, sug), n.get(sug) != nil))
		fix = fmt.Sprintf("rename %q to %q", key, sug)
	case sug != "":
		msg += fmt.Sprintf("; did you mean %s?", sug)
		fix = fmt.Sprintf("rename %q to %q", key, sug)
	case elsewhere != "":
		where := "the top level"
		if p := parentPath(elsewhere); p != "" {
			where = p
		}
		msg += fmt.Sprintf("; %q belongs in %s", key, where)
		if !d.opts.Strict {
			msg += fmt.Sprintf(" (ignored here; %s)", d.fallback(elsewhere, false))
		}
		fix = fmt.Sprintf("move it to %s", elsewhere)
	default:
		switch {
		case strict && d.opts.Strict:
			msg += "; " + why + " refuses it too"
		case strict:
			msg += "; " + why + " refuses it (ignored here: --allow-unknown-keys)"
		default:
			msg += " (ignored, as DeepSpeed ignores it)"
		}
		fix = "remove it"
		if c := closest(key, candidates); c != "" {
			fix += fmt.Sprintf(" (the closest known key is %q)", c)
		}
		if len(candidates) > 0 && len(candidates) <= 16 {
			fix += "; keys accepted here: " + strings.Join(candidates, ", ")
		}
	}
	if d.opts.Strict && (sug != "" || elsewhere != "" || strict) {
		d.errAt(at.line, at.col, path, msg, fix+" (or pass --allow-unknown-keys to ignore unknown keys)")
		return
	}
	d.warnAt(at.line, at.col, path, msg, fix)
}

// strictSection reports whether DeepSpeed refuses unknown keys in the block at path, and says how it does.
func (d *decoder) strictSection(path string) (bool, string) {
	switch path {
	case "optimizer.params":
		return true, "DeepSpeed passes optimizer params to the optimizer's constructor as keyword arguments, which"
	case "scheduler.params":
		return true, "DeepSpeed passes scheduler params to the scheduler's constructor as keyword arguments, which"
	}
	if s, ok := d.tab.spec(path); ok && s.strict {
		return true, "DeepSpeed validates \"" + path + "\" with a pydantic model (extra=\"forbid\") and"
	}
	return false, ""
}

// fallback says what the known key at path is left with when a misspelling of it is ignored; given says the
// file also writes it.
func (d *decoder) fallback(path string, given bool) string {
	if e, ok := d.ents[path]; given || (ok && e.given) {
		return fmt.Sprintf("%s is set in the file", path)
	}
	def, found := any(nil), false
	if s, ok := d.tab.spec(path); ok {
		def, found = s.def, true
	}
	for _, p := range d.params[parentPath(path)] {
		if p.name() == lastName(path) {
			def, found = p.def, true
		}
	}
	if !found {
		return fmt.Sprintf("%s is not set", path)
	}
	return fmt.Sprintf("%s keeps its default, %s", path, formatDefault(def))
}

// findElsewhere finds a table key with this exact name in another block (a key placed at the wrong level).
func (d *decoder) findElsewhere(key, notUnder string) string {
	for _, s := range d.tab.specs {
		if s.name() == key && s.parent() != notUnder {
			return s.path
		}
	}
	return ""
}

// key decodes one table key whose node is v (nil when absent).
func (d *decoder) key(s keySpec, v *node, strict bool) {
	switch s.kind {
	case kindBlock:
		switch s.path {
		case "optimizer":
			d.optimizer(v)
			return
		case "scheduler":
			d.scheduler(v)
			return
		}
		if v != nil && v.kind == nodeNull && s.optional {
			d.put(s.path, nil, d.fileSource(s.path), v, hfNone)
			return
		}
		if v == nil {
			d.put(s.path, nil, Source{Kind: FromDefault}, nil, hfNone)
			if !s.optional {
				d.block(s.path, nil, s.strict)
			}
			return
		}
		if v.kind != nodeObject {
			d.errNode(v, s.path, fmt.Sprintf("expected an object, got %s", describeNode(v)), fmt.Sprintf("write \"%s\": { ... }", s.name()))
			d.put(s.path, nil, Source{Kind: FromDefault}, nil, hfNone)
			if !s.optional {
				d.block(s.path, nil, s.strict)
			}
			return
		}
		d.put(s.path, nil, d.fileSource(s.path), v, hfNone)
		d.block(s.path, v, s.strict)
	case kindRawBlock:
		switch {
		case v == nil:
			d.put(s.path, nil, Source{Kind: FromDefault}, nil, hfNone)
		case v.kind != nodeObject && v.kind != nodeNull:
			d.errNode(v, s.path, fmt.Sprintf("expected an object, got %s", describeNode(v)), fmt.Sprintf("write \"%s\": { ... }", s.name()))
			d.put(s.path, nil, Source{Kind: FromDefault}, nil, hfNone)
		default:
			d.put(s.path, v, d.fileSource(s.path), v, hfNone)
		}
	default:
		d.scalar(s.path, s, v, strict)
	}
}

// describeNode names a value for type errors: its JSON type and, for short scalars, the value itself.
func describeNode(n *node) string {
	switch n.kind {
	case nodeString:
		return fmt.Sprintf("string %q", n.str)
	case nodeNumber:
		return "number " + n.num
	case nodeBool:
		return "boolean " + strconv.FormatBool(n.b)
	}
	return n.kind.String()
}

// formatDefault renders a default for messages.
func formatDefault(v any) string {
	if v == nil {
		return "None"
	}
	return formatValue(v)
}

// scalar decodes a non-block key at path.
func (d *decoder) scalar(path string, s keySpec, v *node, strict bool) {
	if v == nil {
		d.put(path, s.def, Source{Kind: FromDefault}, nil, s.hf)
		return
	}
	if v.isAuto() && s.kind != kindAny {
		switch {
		case s.hf != hfNone:
			d.put(path, nil, Source{Kind: FromAutoHFDefault}, v, s.hf)
			d.autos = append(d.autos, autoKey{path: path, spec: s, n: v})
		case strict:
			d.put(path, s.def, Source{Kind: FromAutoDropped}, v, s.hf)
		default:
			d.errNode(v, path, "\"auto\" is not accepted here: only the keys Hugging Face fills from its TrainingArguments take \"auto\"",
				fmt.Sprintf("write a value, or remove the key to use the default (%s)", formatDefault(s.def)))
			d.put(path, s.def, Source{Kind: FromDefault}, nil, s.hf)
		}
		return
	}
	if v.kind == nodeNull {
		if s.def == nil {
			d.put(path, nil, d.fileSource(path), v, s.hf)
			return
		}
		d.errNode(v, path, "null is not accepted here", fmt.Sprintf("remove the key to use the default (%s), or write a value", formatDefault(s.def)))
		d.put(path, s.def, Source{Kind: FromDefault}, nil, s.hf)
		return
	}
	val, problem, fix := convert(s.kind, v)
	if problem == "" {
		problem, fix = checkValue(s, val)
	}
	if problem != "" && s.name() == "warmup_type" && !d.opts.Strict {
		// DeepSpeed itself warns and falls back to log warmup here.
		d.warnNode(v, path, problem+"; using \"log\" as DeepSpeed does", fix)
		d.put(path, "log", d.fileSource(path), v, s.hf)
		return
	}
	if problem != "" {
		d.errNode(v, path, problem, fix)
		d.put(path, s.def, Source{Kind: FromDefault}, nil, s.hf)
		return
	}
	d.put(path, val, d.fileSource(path), v, s.hf)
}

// checkValue applies a key's enum and range; it returns the canonical value through the problem-free path.
func checkValue(s keySpec, val any) (problem, fix string) {
	if len(s.enum) > 0 {
		str, _ := val.(string)
		for _, e := range s.enum {
			if str == e || (s.fold && strings.EqualFold(str, e)) {
				return "", ""
			}
		}
		problem = fmt.Sprintf("%q is not one of %s", str, quoteList(s.enum))
		if sug := suggest(str, s.enum); sug != "" {
			problem += fmt.Sprintf("; did you mean %q?", sug)
			return problem, fmt.Sprintf("write %q", sug)
		}
		return problem, "write one of " + quoteList(s.enum)
	}
	check := func(x float64) (string, string) {
		if msg := s.rng.check(x); msg != "" {
			return fmt.Sprintf("%s %s (got %s)", s.name(), msg, formatValue(val)), "use a value in range; the default is " + formatDefault(s.def)
		}
		return "", ""
	}
	switch x := val.(type) {
	case int64:
		return check(float64(x))
	case float64:
		return check(x)
	case []float64:
		for _, e := range x {
			if p, f := check(e); p != "" {
				return p, f
			}
		}
	}
	return "", ""
}

func quoteList(vals []string) string {
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

// convert turns a node into the Go value for a kind, or explains why it cannot.
func convert(k kind, v *node) (val any, problem, fix string) {
	switch k {
	case kindBool:
		switch v.kind {
		case nodeBool:
			return v.b, "", ""
		case nodeString:
			if l := strings.ToLower(v.str); l == "true" || l == "false" {
				return nil, fmt.Sprintf("expected true or false, got the string %q", v.str), fmt.Sprintf("write %s without quotes", l)
			}
		}
		return nil, fmt.Sprintf("expected true or false, got %s", describeNode(v)), "write true or false"
	case kindInt:
		if v.kind == nodeString {
			if _, err := strconv.ParseFloat(strings.TrimSpace(v.str), 64); err == nil {
				return nil, fmt.Sprintf("expected a number, got the string %q", v.str), fmt.Sprintf("write %s without quotes", strings.TrimSpace(v.str))
			}
		}
		if v.kind != nodeNumber {
			return nil, fmt.Sprintf("expected an integer, got %s", describeNode(v)), "write an integer such as 8 or 5e8"
		}
		i, problem := intOf(v.num)
		if problem != "" {
			return nil, problem, "write a whole number"
		}
		return i, "", ""
	case kindFloat:
		if v.kind == nodeString {
			if _, err := strconv.ParseFloat(strings.TrimSpace(v.str), 64); err == nil {
				return nil, fmt.Sprintf("expected a number, got the string %q", v.str), fmt.Sprintf("write %s without quotes", strings.TrimSpace(v.str))
			}
		}
		if v.kind != nodeNumber {
			return nil, fmt.Sprintf("expected a number, got %s", describeNode(v)), "write a number such as 0.001"
		}
		f, err := v.float()
		if err != nil {
			return nil, fmt.Sprintf("number %s is out of range", v.num), "write a smaller number"
		}
		return f, "", ""
	case kindString:
		if v.kind != nodeString {
			return nil, fmt.Sprintf("expected a string, got %s", describeNode(v)), "write the value in double quotes"
		}
		return v.str, "", ""
	case kindFloatList:
		if v.kind != nodeArray {
			return nil, fmt.Sprintf("expected a list of numbers, got %s", describeNode(v)), "write e.g. [0.9, 0.999]"
		}
		out := make([]float64, 0, len(v.elems))
		for _, e := range v.elems {
			if e.kind != nodeNumber {
				return nil, fmt.Sprintf("expected a list of numbers, found %s in it", describeNode(e)), "write e.g. [0.9, 0.999]"
			}
			f, err := e.float()
			if err != nil {
				return nil, fmt.Sprintf("number %s is out of range", e.num), "write a smaller number"
			}
			out = append(out, f)
		}
		return out, "", ""
	case kindStringList:
		if v.kind != nodeArray {
			return nil, fmt.Sprintf("expected a list of strings, got %s", describeNode(v)), "write e.g. [\"all_reduce\"]"
		}
		out := make([]string, 0, len(v.elems))
		for _, e := range v.elems {
			if e.kind != nodeString {
				return nil, fmt.Sprintf("expected a list of strings, found %s in it", describeNode(e)), "quote every element"
			}
			out = append(out, e.str)
		}
		return out, "", ""
	}
	return v, "", "" // kindAny: keep the node
}

// intOf reads an integer literal. DeepSpeed configs write sizes as 5e8, which Python reads as a float and
// pydantic accepts for int fields when integral; gotrain does the same and rejects fractions.
func intOf(lit string) (int64, string) {
	if i, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return i, ""
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, fmt.Sprintf("number %s is out of range", lit)
	}
	if f != math.Trunc(f) {
		return 0, fmt.Sprintf("expected an integer, got %s", lit)
	}
	if f >= math.MaxInt64 || f < math.MinInt64 {
		return 0, fmt.Sprintf("integer %s is out of range", lit)
	}
	return int64(f), ""
}

// paramsBlock decodes an optimizer or scheduler "params" object against specs. context names the type for
// messages; known is false when the type itself is invalid, so its params cannot be checked.
func (d *decoder) paramsBlock(path string, n *node, specs []paramSpec, known bool, context string) {
	d.params[path] = specs
	if n != nil && n.kind == nodeNull {
		n = nil
	}
	if n != nil && n.kind != nodeObject {
		d.errNode(n, path, fmt.Sprintf("expected an object, got %s", describeNode(n)), "write \"params\": { ... }")
		n = nil
	}
	if n != nil && path == "optimizer.params" {
		if v := n.get("max_grad_norm"); v != nil {
			at := n.keyPos("max_grad_norm")
			d.errAt(at.line, at.col, path+".max_grad_norm",
				"max_grad_norm is not supported as an optimizer parameter (DeepSpeed raises ValueError)",
				fmt.Sprintf("remove it and set the top-level \"gradient_clipping\": %s instead", v.compact()))
			n.remove("max_grad_norm")
		}
	}
	if n != nil && known {
		names := make([]string, len(specs))
		for i, s := range specs {
			names[i] = s.name()
		}
		d.checkUnknown(path, n, names, context)
	}
	for _, s := range specs {
		d.scalar(join(path, s.name()), s.keySpec, n.get(s.name()), false)
	}
}

// rawValue converts a node to plain Go values (for torch scheduler params, passed through unchecked).
func rawValue(n *node) any {
	switch n.kind {
	case nodeBool:
		return n.b
	case nodeNumber:
		if i, err := strconv.ParseInt(n.num, 10, 64); err == nil {
			return i
		}
		f, _ := n.float()
		return f
	case nodeString:
		return n.str
	case nodeArray:
		out := make([]any, len(n.elems))
		for i, e := range n.elems {
			out[i] = rawValue(e)
		}
		return out
	case nodeObject:
		out := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			out[k] = rawValue(n.vals[i])
		}
		return out
	}
	return nil
}

// typeName reads the "type" key of an optimizer or scheduler block.
func (d *decoder) typeName(block string, n *node, example string) (string, *node) {
	tn := n.get("type")
	switch {
	case tn == nil:
		d.errNode(n, block+".type", "the block has no \"type\"", fmt.Sprintf("add \"type\": %q", example))
		return "", nil
	case tn.kind != nodeString:
		d.errNode(tn, block+".type", fmt.Sprintf("expected a string, got %s", describeNode(tn)), fmt.Sprintf("write \"type\": %q", example))
		return "", nil
	}
	return tn.str, tn
}

// optimizer decodes the "optimizer" block (§1.2).
func (d *decoder) optimizer(n *node) {
	if n == nil || n.kind == nodeNull {
		d.put("optimizer", nil, Source{Kind: FromGotrain, Note: "AdamW"}, nil, hfNone)
		return
	}
	if n.kind != nodeObject {
		d.errNode(n, "optimizer", fmt.Sprintf("expected an object, got %s", describeNode(n)), "write \"optimizer\": {\"type\": \"AdamW\", \"params\": {...}}")
		d.put("optimizer", nil, Source{Kind: FromGotrain, Note: "AdamW"}, nil, hfNone)
		return
	}
	d.put("optimizer", nil, Source{Kind: FromFile}, n, hfNone)
	d.checkUnknown("optimizer", n, d.tab.childNames("optimizer"), "")
	s, _ := d.tab.spec("optimizer.legacy_fusion")
	d.key(s, n.get("legacy_fusion"), false)

	typ, tn := d.typeName("optimizer", n, "AdamW")
	canonical, torch, ok := optimizerKind(typ)
	if tn != nil && !ok {
		all := append(append([]string{}, dsOptimizerNames()...), torchOptimizerNames()...)
		msg := fmt.Sprintf("unknown optimizer %q: not a DeepSpeed optimizer and not a torch.optim class", typ)
		fix := "use \"AdamW\" (or another DeepSpeed optimizer: " + strings.Join(dsOptimizerNames(), ", ") + ")"
		if sug := suggest(typ, all); sug != "" {
			msg += fmt.Sprintf("; did you mean %s?", sug)
			fix = fmt.Sprintf("write %q (torch.optim names are case-sensitive)", sug)
		}
		d.errNode(tn, "optimizer.type", msg, fix)
	}
	if tn != nil {
		d.put("optimizer.type", typ, Source{Kind: FromFile}, tn, hfNone)
	}
	context := typ
	if canonical != "" && !torch {
		context = displayOptimizer(canonical)
	}
	var specs []paramSpec
	if ok {
		specs = optimizerParams(canonical, torch)
	}
	d.paramsBlock("optimizer.params", n.get("params"), specs, ok, context)
}

func displayOptimizer(canonical string) string {
	for _, n := range dsOptimizerNames() {
		if strings.ToLower(n) == canonical {
			return n
		}
	}
	return canonical
}

// scheduler decodes the "scheduler" block (§1.3).
func (d *decoder) scheduler(n *node) {
	if n == nil || n.kind == nodeNull {
		d.put("scheduler", nil, Source{Kind: FromDefault}, nil, hfNone)
		return
	}
	if n.kind != nodeObject {
		d.errNode(n, "scheduler", fmt.Sprintf("expected an object, got %s", describeNode(n)), "write \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {...}}")
		d.put("scheduler", nil, Source{Kind: FromDefault}, nil, hfNone)
		return
	}
	d.put("scheduler", nil, Source{Kind: FromFile}, n, hfNone)
	d.checkUnknown("scheduler", n, d.tab.childNames("scheduler"), "")
	typ, tn := d.typeName("scheduler", n, "WarmupLR")
	if tn == nil {
		return
	}
	d.put("scheduler.type", typ, Source{Kind: FromFile}, tn, hfNone)
	pn := n.get("params")
	switch {
	case isDSScheduler(typ):
		specs := schedulerParams(typ)
		d.paramsBlock("scheduler.params", pn, specs, true, typ)
		d.requiredSchedulerParams(typ, specs, pn, tn)
	case isTorchScheduler(typ):
		d.params["scheduler.params"] = nil
		if pn != nil && pn.kind == nodeObject {
			for i, k := range pn.keys {
				d.put("scheduler.params."+k, rawValue(pn.vals[i]), Source{Kind: FromFile}, pn.vals[i], hfNone)
			}
		}
	default:
		all := append(append([]string{}, dsSchedulerNames()...), torchSchedulerNames()...)
		msg := fmt.Sprintf("DeepSpeed does not recognize LR scheduler %q", typ)
		fix := "use one of " + strings.Join(dsSchedulerNames(), ", ")
		if sug := suggest(typ, all); sug != "" {
			msg += fmt.Sprintf("; did you mean %s?", sug)
			fix = fmt.Sprintf("write %q (scheduler names are case-sensitive)", sug)
		}
		d.errNode(tn, "scheduler.type", msg, fix)
	}
}

// requiredSchedulerParams reports required parameters the file leaves out. total_num_steps is the exception
// gotrain can fill: the run knows its own length, so with Overrides.TotalSteps it is taken from there.
func (d *decoder) requiredSchedulerParams(typ string, specs []paramSpec, pn *node, tn *node) {
	for _, s := range specs {
		if !s.required || (pn != nil && pn.kind == nodeObject && pn.get(s.name()) != nil) {
			continue
		}
		path := "scheduler.params." + s.name()
		if s.name() == "total_num_steps" {
			if steps, ok := d.opts.Overrides.TotalSteps.Get(); ok {
				d.put(path, int64(steps), Source{Kind: FromRun, Note: "total training steps"}, nil, s.hf)
				d.warnNode(tn, path, fmt.Sprintf("%s requires total_num_steps, which the file does not set; using the run's %d training steps (DeepSpeed itself would fail)", typ, steps),
					fmt.Sprintf("add \"total_num_steps\": %d (or \"auto\") to keep the file usable with DeepSpeed", steps))
				continue
			}
			d.put(path, int64(DefaultMaxSteps), Source{Kind: FromRunTime, Note: runLength()}, nil, s.hf)
			d.warnNode(tn, path, fmt.Sprintf("%s requires total_num_steps, which the file does not set; the run's length, %s, fills it (DeepSpeed itself would fail)", typ, runLength()),
				"add \"total_num_steps\": <training steps> (or \"auto\") to keep the file usable with DeepSpeed")
			continue
		}
		d.errNode(tn, path, fmt.Sprintf("%s requires %s", typ, s.name()), fmt.Sprintf("add \"%s\": <value> to scheduler.params", s.name()))
	}
}

// Getters used to build the typed Config; each records the path as read.

func (d *decoder) val(path string) any {
	d.read[path] = true
	if e, ok := d.ents[path]; ok {
		return e.v
	}
	return nil
}

func (d *decoder) boolean(path string) bool { b, _ := d.val(path).(bool); return b }

func (d *decoder) optBool(path string) Opt[bool] {
	if b, ok := d.val(path).(bool); ok {
		return Some(b)
	}
	return Opt[bool]{}
}

func (d *decoder) int64v(path string) int64 { i, _ := d.val(path).(int64); return i }

func (d *decoder) intv(path string) int { return int(d.int64v(path)) }

func (d *decoder) optInt(path string) Opt[int] {
	if i, ok := d.val(path).(int64); ok {
		return Some(int(i))
	}
	return Opt[int]{}
}

func (d *decoder) float(path string) float64 {
	switch x := d.val(path).(type) {
	case float64:
		return x
	case int64:
		return float64(x)
	}
	return 0
}

func (d *decoder) str(path string) string { s, _ := d.val(path).(string); return s }

func (d *decoder) optStr(path string) Opt[string] {
	if s, ok := d.val(path).(string); ok {
		return Some(s)
	}
	return Opt[string]{}
}

func (d *decoder) given(path string) bool {
	e, ok := d.ents[path]
	return ok && e.given
}

// sortedKeys returns the keys of a map in order, for deterministic output.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
