package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/gotrain/gotrain/backend"
)

// LoRA adapters as PEFT defines them (peft.tuners.lora): a targeted linear
// layer y = W x (+ b) becomes y = W x (+ b) + s·B(A x), with A (r, in),
// B (out, r) and s = alpha/r, or alpha/√r with rsLoRA. W stays frozen; only
// A and B train.
//
// The forward pass never forms W + s·BA. For each of the block's four
// projections (GPT-2's c_attn, attn.c_proj, c_fc, mlp.c_proj; the
// family's fused q/k/v, o_proj, fused gate/up, down_proj) it runs two
// small GEMMs beside the frozen one: u = x·A_catᵀ, where A_cat stacks the
// A of every targeted module of the projection (they are adjacent in the
// adapter group), then out += u·Bbdᵀ, where Bbd (out, m·r) holds s·B_i in
// module i's output rows and column block i, zero elsewhere. Bbd is built
// each time from the B's by one tiny GEMM per module against a constant
// selector S_i = s·[0 … I_r … 0]ᵀ (m·r, r), so the projection's fused
// output (q, k and v side by side in a row) gets every module's
// contribution in its own columns without a strided copy, an op no backend
// has. Backward: dBbd = doutᵀ·u, dB_i += dBbd_i·S_i (the s of the forward
// comes back through S_i), du = dout·Bbd, dA_cat += duᵀ·x, dx += du·A_cat.

// LoRA is an adapter configuration: PEFT's adapter_config.json keys that
// change the maths. Parse a file with ParseAdapterConfig.
type LoRA struct {
	R      int      // rank r
	Alpha  float64  // lora_alpha
	RSLoRA bool     // use_rslora: s = alpha/√r instead of alpha/r
	Target []string // target_modules: module names matched as PEFT does (the name, or a suffix after a dot), or "all-linear"
	// Dropout is lora_dropout, the probability of dropping an element of
	// an adapter's input in a training pass (Model.Train); evaluation,
	// sampling and merging ignore it, as PEFT's eval mode does.
	Dropout float64
}

// Scale is s: alpha/r, or alpha/√r with rsLoRA.
func (l LoRA) Scale() float64 {
	if l.RSLoRA {
		return l.Alpha / math.Sqrt(float64(l.R))
	}
	return l.Alpha / float64(l.R)
}

// the four projections of a block, in the order of the adapter group.
const (
	slotQKV = iota
	slotO
	slotUp
	slotDown
	numSlots
)

// loraModule is one linear layer of a block that may carry an adapter.
type loraModule struct {
	path   string // after the block prefix, e.g. "attn.c_attn", "self_attn.q_proj"
	slot   int
	rowOff int // first row of the projection's (fused) output it writes
	in     int
	out    int
}

// loraModules lists a block's linear layers in PEFT's module paths.
func (c Config) loraModules() []loraModule {
	C, A, F := c.C, c.AttnWidth(), c.FF
	if c.Arch == ArchGPT2 {
		return []loraModule{
			{"attn.c_attn", slotQKV, 0, C, 3 * C},
			{"attn.c_proj", slotO, 0, C, C},
			{"mlp.c_fc", slotUp, 0, C, 4 * C},
			{"mlp.c_proj", slotDown, 0, 4 * C, C},
		}
	}
	q, kv := c.NH*c.HD, c.KV*c.HD
	return []loraModule{
		{"self_attn.q_proj", slotQKV, 0, C, q},
		{"self_attn.k_proj", slotQKV, q, C, kv},
		{"self_attn.v_proj", slotQKV, q + kv, C, kv},
		{"self_attn.o_proj", slotO, 0, A, C},
		{"mlp.gate_proj", slotUp, 0, C, F},
		{"mlp.up_proj", slotUp, F, C, F},
		{"mlp.down_proj", slotDown, 0, F, C},
	}
}

// peftPrefix is the module path of block l in the Hugging Face model PEFT
// wraps (GPT2LMHeadModel keeps its blocks under "transformer.").
func (c Config) peftPrefix(l int) string {
	if c.Arch == ArchGPT2 {
		return "transformer." + c.blockPrefix(l)
	}
	return c.blockPrefix(l)
}

// matchTarget is PEFT's check_target_module_exists for a list: the full
// module name equals a key or ends with "." + key.
func matchTarget(full string, targets []string) bool {
	for _, t := range targets {
		if t == "all-linear" || full == t || strings.HasSuffix(full, "."+t) {
			return true
		}
	}
	return false
}

// adapterMod is one adapted module in a block's adapter group.
type adapterMod struct {
	loraModule
	aOff, bOff int // offsets of A (r, in) and B (out, r) in the group
}

// adapterSlot is one projection's adapters: their A's are adjacent from
// aOff (A_cat, (m·r, in)).
type adapterSlot struct {
	in, out int
	aOff    int
	mods    []adapterMod
}

// AdapterLayout lays out a model's LoRA adapters as parameter groups, one
// per block (group l holds block l's A's and B's), for a ZeRO engine of
// their own (zero.LayoutOf accepts it). In a group, each projection's
// adapted modules put their A's one after the other and then their B's.
// An AdapterLayout is immutable.
type AdapterLayout struct {
	cfg     Config
	lora    LoRA
	slots   [numSlots]adapterSlot // relative to a group's start; the same in every block
	per     int                   // elements per group
	tensors []Tensor              // every tensor, PEFT names, offsets in the flat adapter buffer
}

// NewAdapterLayout lays out adapters of l on cfg's blocks. It refuses a
// rank below 1 and targets that match no linear layer of a block (PEFT
// refuses those too).
func NewAdapterLayout(cfg Config, l LoRA) (*AdapterLayout, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if l.R < 1 {
		return nil, fmt.Errorf("model: LoRA rank r = %d: want r ≥ 1", l.R)
	}
	if len(l.Target) == 0 {
		return nil, fmt.Errorf("model: LoRA has no target_modules: name the layers to adapt (e.g. %q) or \"all-linear\"", cfg.loraModules()[0].path)
	}
	lay := &AdapterLayout{cfg: cfg, lora: l}
	var chosen []loraModule
	for _, mod := range cfg.loraModules() {
		if matchTarget(cfg.peftPrefix(0)+mod.path, l.Target) {
			chosen = append(chosen, mod)
		}
	}
	if len(chosen) == 0 {
		var names []string
		for _, mod := range cfg.loraModules() {
			names = append(names, mod.path[strings.LastIndexByte(mod.path, '.')+1:])
		}
		return nil, fmt.Errorf("model: LoRA target_modules %v match no linear layer of a %s block; its layers are %v (or use \"all-linear\")", l.Target, cfg.Arch, names)
	}
	at := 0
	for s := range numSlots {
		sl := &lay.slots[s]
		sl.aOff = at
		for _, mod := range chosen {
			if mod.slot == s {
				sl.in, sl.out = mod.in, slotOut(cfg, s)
				sl.mods = append(sl.mods, adapterMod{loraModule: mod, aOff: at})
				at += l.R * mod.in
			}
		}
		for i := range sl.mods {
			sl.mods[i].bOff = at
			at += sl.mods[i].out * l.R
		}
	}
	lay.per = at
	for b := range cfg.L {
		base := b * lay.per
		for s := range numSlots {
			for _, mod := range lay.slots[s].mods {
				name := "base_model.model." + cfg.peftPrefix(b) + mod.path
				lay.tensors = append(lay.tensors,
					Tensor{Name: name + ".lora_A.weight", Shape: []int{l.R, mod.in}, Offset: base + mod.aOff, Len: l.R * mod.in, Layer: b, Decay: true},
					Tensor{Name: name + ".lora_B.weight", Shape: []int{mod.out, l.R}, Offset: base + mod.bOff, Len: mod.out * l.R, Layer: b, Decay: true})
			}
		}
	}
	// Buffer order: a group's A's then B's per slot, so sort the names'
	// list by offset.
	slices.SortFunc(lay.tensors, func(a, b Tensor) int { return a.Offset - b.Offset })
	return lay, nil
}

// slotOut is the width of projection s's output.
func slotOut(c Config, s int) int {
	switch s {
	case slotQKV:
		return c.QKVWidth()
	case slotUp:
		return c.upWidth()
	}
	return c.C
}

// LoRA is the configuration the layout was made for.
func (lay *AdapterLayout) LoRA() LoRA { return lay.lora }

// Config is the model shape the adapters attach to.
func (lay *AdapterLayout) Config() Config { return lay.cfg }

// Tensors lists every adapter tensor in buffer order with PEFT's names
// (base_model.model.<module path>.lora_A.weight, (r, in); …lora_B.weight,
// (out, r)). The slice is shared: do not modify it.
func (lay *AdapterLayout) Tensors() []Tensor { return lay.tensors }

// Modules lists the adapted modules' full paths in block 0, without the
// block prefix (e.g. "self_attn.q_proj"), as target_modules of a saved
// adapter_config.json name them.
func (lay *AdapterLayout) Modules() []string {
	var out []string
	for s := range numSlots {
		for _, mod := range lay.slots[s].mods {
			out = append(out, mod.path[strings.LastIndexByte(mod.path, '.')+1:])
		}
	}
	return out
}

// NumParams is the number of adapter elements.
func (lay *AdapterLayout) NumParams() int { return lay.per * lay.cfg.L }

// FlopsPerToken is a LoRA run's training cost of one token at sequence
// length T, counted as Config.FlopsPerToken counts a full run's, from what
// is multiplied: the frozen weights cost their forward and input-gradient
// products only (4·W, no weight gradient), attention its full 6·L·T·NH·HD,
// and each adapter its A (r×in) and B (out×r) forward, input and weight
// gradients (6·r·(in+out)). The block-diagonal and selector products the
// implementation adds for fused projections are not counted.
func (lay *AdapterLayout) FlopsPerToken(T int) float64 {
	c := lay.cfg
	full := c.FlopsPerToken(T)
	attn := 6 * float64(c.L) * float64(T) * float64(c.NH) * float64(c.HD)
	w := (full - attn) / 6
	var ad float64
	for _, sl := range lay.slots {
		for _, mod := range sl.mods {
			ad += 6 * float64(lay.lora.R) * float64(mod.in+mod.out)
		}
	}
	return 4*w + attn + float64(c.L)*ad
}

// NumGroups is L: one group per block.
func (lay *AdapterLayout) NumGroups() int { return lay.cfg.L }

// GroupRange is block g's adapters.
func (lay *AdapterLayout) GroupRange(g int) (off, n int) {
	if g < 0 || g >= lay.cfg.L {
		panic("model: adapter group out of range")
	}
	return g * lay.per, lay.per
}

// GroupSpans calls f for each of group g's tensors in order. Every
// adapter matrix takes weight decay, as Hugging Face's Trainer groups a
// PEFT model's parameters (only biases and norm weights go without).
func (lay *AdapterLayout) GroupSpans(g int, f func(off, n int, decay bool)) {
	off, n := lay.GroupRange(g)
	for _, t := range lay.tensors {
		if t.Offset >= off && t.Offset < off+n {
			f(t.Offset, t.Len, t.Decay)
		}
	}
}

// AcquisitionOrder: the blocks in order forward, from the last backward,
// as the model acquires its blocks.
func (lay *AdapterLayout) AcquisitionOrder(backward bool) []int {
	out := make([]int, lay.cfg.L)
	for i := range out {
		out[i] = i
		if backward {
			out[i] = lay.cfg.L - 1 - i
		}
	}
	return out
}

// InitAdapters returns initial adapter values in the flat layout, as PEFT
// initialises them (init_lora_weights=True): A from kaiming_uniform_ with
// a = √5, which is U(−1/√in, 1/√in), and B zero, so the adapted model starts
// equal to the base. The draw is seeded and deterministic but is not
// PyTorch's generator.
func InitAdapters(lay *AdapterLayout, seed uint64) []float32 {
	out := make([]float32, lay.NumParams())
	rng := rand.New(rand.NewPCG(seed, 0x4c6f5241))
	for _, t := range lay.tensors {
		if !strings.HasSuffix(t.Name, ".lora_A.weight") {
			continue
		}
		bound := 1 / math.Sqrt(float64(t.Shape[1]))
		for i := range t.Len {
			out[t.Offset+i] = float32((2*rng.Float64() - 1) * bound)
		}
	}
	return out
}

// LoRAOptions attach adapters to a Model. The model's own store then
// serves a frozen base: it may hand out the zero Buffer for gradients
// (zero.Options.Frozen), and the model adds nothing to the base's.
type LoRAOptions struct {
	Layout *AdapterLayout
	// Store supplies the adapters and their gradients, group l for block
	// l, in Layout.AcquisitionOrder: a ZeRO engine over zero.LayoutOf(Layout).
	Store ParamStore
	// DType is the adapters' storage and compute type (the Store's
	// parameter dtype); zero means the activations'. F32 adapters on a
	// 16-bit model compute as PEFT's do: each adapted projection's input
	// (and, in backward, its output gradient) is cast to fp32 once, both
	// small GEMMs and their gradients run in fp32, and the fp32 result is
	// added to the projection's 16-bit output with one rounding.
	DType backend.DType
}

// loraState is what a model with adapters holds besides the adapters: the
// selectors and the scratch of the two small GEMMs.
type loraState struct {
	lay   *AdapterLayout
	store ParamStore
	dt    backend.DType // the adapters' compute dtype
	cast  bool          // dt is not the activations' dtype: inputs are cast to it
	// lora_dropout (p > 0): each module's input gets its own mask, drawn
	// from the training pass's seed (Model.Train) and the block, slot and
	// module, so checkpointing's recompute and backward redraw it.
	p              float32
	drop           backend.Dropouter
	armed, active  bool                       // Train was called / this pass is a training pass
	nextSeed, seed uint64                     // Train's seed / this pass's
	layer          int                        // the block whose adapters are acquired
	xd             backend.Buffer             // p > 0: (N, max in), a module's dropped input in dt
	sI             backend.Buffer             // p > 0: s·I (r, r)
	xf             backend.Buffer             // cast: (N, max in), the projection's input in dt
	df             backend.Buffer             // cast: (N, max out), its output gradient in dt
	sel            [numSlots][]backend.Buffer // per module: S_i (m·r, r)
	selT           [numSlots][]backend.Buffer // per module: S_iᵀ (r, m·r)
	bufs           []backend.Buffer           // everything allocated, for Free
	n              int                        // rows the N-sized scratch holds
	u, du          backend.Buffer             // (N, m·r)
	y              backend.Buffer             // (N, max(out, in)): the adapter's output, or its dx
	bbd            backend.Buffer             // (out, m·r)
	dbbd           backend.Buffer             // (out, m·r)
	tmp            backend.Buffer             // (out, r): one module's dB before it is added
}

// newLoRA builds the selectors of lo's layout on be.
func newLoRA(be backend.Backend, cfg Config, lo *LoRAOptions, dt backend.DType) (*loraState, error) {
	lay := lo.Layout
	if lay == nil || lo.Store == nil {
		return nil, fmt.Errorf("model: LoRA options need the adapter layout and the adapters' store")
	}
	if lay.cfg != cfg {
		return nil, fmt.Errorf("model: the adapters were laid out for another model shape")
	}
	if lo.DType != 0 {
		if !lo.DType.IsFloat() {
			return nil, fmt.Errorf("model: LoRA adapter dtype %s is not a float type", lo.DType)
		}
		dt = lo.DType
	}
	ls := &loraState{lay: lay, store: lo.Store, dt: dt, p: float32(lay.lora.Dropout)}
	r, s := lay.lora.R, float32(lay.lora.Scale())
	for k := range numSlots {
		mods := lay.slots[k].mods
		mr := len(mods) * r
		for i := range mods {
			sel := make([]float32, mr*r)  // (m·r, r): s·I in rows i·r…
			selT := make([]float32, r*mr) // (r, m·r): s·I in columns i·r…
			for j := range r {
				sel[(i*r+j)*r+j] = s
				selT[j*mr+i*r+j] = s
			}
			a, err := ls.upload(be, dt, sel)
			if err != nil {
				ls.free(be)
				return nil, err
			}
			b, err := ls.upload(be, dt, selT)
			if err != nil {
				ls.free(be)
				return nil, err
			}
			ls.sel[k], ls.selT[k] = append(ls.sel[k], a), append(ls.selT[k], b)
		}
	}
	if ls.p > 0 {
		d, ok := be.(backend.Dropouter)
		if !ok {
			ls.free(be)
			return nil, fmt.Errorf("model: lora_dropout %g needs dropout, which the %s backend does not have; set it to 0", lay.lora.Dropout, be.Name())
		}
		ls.drop = d
		r := lay.lora.R
		si := make([]float32, r*r)
		for j := range r {
			si[j*r+j] = s
		}
		a, err := ls.upload(be, dt, si)
		if err != nil {
			ls.free(be)
			return nil, err
		}
		ls.sI = a
	}
	return ls, nil
}

func (ls *loraState) upload(be backend.Backend, dt backend.DType, vals []float32) (backend.Buffer, error) {
	b, err := be.Alloc(backend.Device, backend.Workspace, dt, len(vals))
	if err != nil {
		return b, fmt.Errorf("model: LoRA selectors: %w", err)
	}
	ls.bufs = append(ls.bufs, b)
	if err := backend.WriteF32(be, b, vals); err != nil {
		return b, fmt.Errorf("model: LoRA selectors: %w", err)
	}
	return b, nil
}

func (ls *loraState) free(be backend.Backend) {
	for _, b := range ls.bufs {
		be.Free(b)
	}
	ls.bufs, ls.n = nil, 0
}

// reserve makes the scratch for N rows, given the activations' dtype.
func (ls *loraState) reserve(be backend.Backend, act backend.DType, N int) error {
	if ls.n >= N {
		return nil
	}
	dt := ls.dt
	ls.cast = dt != act
	maxMR, maxW, maxIn, maxOut := 1, 1, 1, 1
	for _, sl := range ls.lay.slots {
		maxMR = max(maxMR, len(sl.mods)*ls.lay.lora.R)
		if len(sl.mods) > 0 {
			maxW, maxIn, maxOut = max(maxW, sl.in, sl.out), max(maxIn, sl.in), max(maxOut, sl.out)
		}
	}
	r := ls.lay.lora.R
	var bufs []backend.Buffer
	alloc := func(cat backend.Category, n int) backend.Buffer {
		b, err := be.Alloc(backend.Device, cat, dt, n)
		if err != nil {
			return backend.Buffer{}
		}
		bufs = append(bufs, b)
		return b
	}
	u, du, y := alloc(backend.Activations, N*maxMR), alloc(backend.Activations, N*maxMR), alloc(backend.Activations, N*maxW)
	bbd, dbbd, tmp := alloc(backend.Workspace, maxOut*maxMR), alloc(backend.Workspace, maxOut*maxMR), alloc(backend.Workspace, maxOut*r)
	want := 6
	var xf, df, xd backend.Buffer
	if ls.cast {
		xf, df, want = alloc(backend.Activations, N*maxIn), alloc(backend.Activations, N*maxOut), want+2
	}
	if ls.p > 0 {
		xd, want = alloc(backend.Activations, N*maxIn), want+1
	}
	if len(bufs) != want {
		for _, b := range bufs {
			be.Free(b)
		}
		return fmt.Errorf("model: LoRA scratch for %d rows: out of memory in the device pool", N)
	}
	ls.u, ls.du, ls.y, ls.bbd, ls.dbbd, ls.tmp, ls.xf, ls.df, ls.xd = u, du, y, bbd, dbbd, tmp, xf, df, xd
	ls.bufs = append(ls.bufs, bufs...)
	ls.n = N
	return nil
}

// buildBbd writes Bbd (out, m·r) of slot k from the B's in the adapter
// group w: rows of modules without an adapter stay zero.
func (m *Model) buildBbd(k int, w backend.Buffer) {
	be, ls := m.be, m.lora
	sl, r := &ls.lay.slots[k], ls.lay.lora.R
	mr := len(sl.mods) * r
	bbd := ls.bbd.Slice(0, sl.out*mr)
	if len(sl.mods) > 1 || sl.mods[0].out != sl.out {
		be.Zero(bbd)
	}
	for i, mod := range sl.mods {
		be.MatmulForward(bbd.Slice(mod.rowOff*mr, mod.out*mr), w.Slice(mod.bOff, mod.out*r), ls.sel[k][i], backend.Buffer{}, mod.out, r, mr)
	}
}

// loraForward adds projection k's adapters to out (N, out), the frozen
// projection of x (N, in). w is the block's adapter group.
func (m *Model) loraForward(k int, out, x, w backend.Buffer, N int) {
	ls := m.lora
	if ls == nil || len(ls.lay.slots[k].mods) == 0 {
		return
	}
	if ls.p > 0 && ls.active {
		m.loraForwardDropout(k, out, x, w, N)
		return
	}
	be, sl := m.be, &ls.lay.slots[k]
	mr := len(sl.mods) * ls.lay.lora.R
	u, y := ls.u.Slice(0, N*mr), ls.y.Slice(0, N*sl.out)
	x = ls.castIn(be, ls.xf, x, N*sl.in)
	be.MatmulForward(u, x, w.Slice(sl.aOff, mr*sl.in), backend.Buffer{}, N, sl.in, mr)
	m.buildBbd(k, w)
	be.MatmulForward(y, u, ls.bbd.Slice(0, sl.out*mr), backend.Buffer{}, N, mr, sl.out)
	be.Add(out, out, y, N*sl.out)
}

// loraBackward adds projection k's adapter gradients to g (the block's
// adapter gradient group) and the adapters' part of the input gradient to
// dx (N, in), given dout (N, out) and the projection's input x.
func (m *Model) loraBackward(k int, dx, dout, x, w, g backend.Buffer, N int) {
	ls := m.lora
	if ls == nil || len(ls.lay.slots[k].mods) == 0 {
		return
	}
	if ls.p > 0 && ls.active {
		m.loraBackwardDropout(k, dx, dout, x, w, g, N)
		return
	}
	be, sl, r := m.be, &ls.lay.slots[k], ls.lay.lora.R
	mr := len(sl.mods) * r
	u, du, dxl := ls.u.Slice(0, N*mr), ls.du.Slice(0, N*mr), ls.y.Slice(0, N*sl.in)
	x, dout = ls.castIn(be, ls.xf, x, N*sl.in), ls.castIn(be, ls.df, dout, N*sl.out)
	aCat := w.Slice(sl.aOff, mr*sl.in)
	be.MatmulForward(u, x, aCat, backend.Buffer{}, N, sl.in, mr)
	m.buildBbd(k, w)
	dbbd := ls.dbbd.Slice(0, sl.out*mr)
	be.Zero(dbbd)
	be.MatmulBackward(du, dbbd, backend.Buffer{}, dout, u, ls.bbd.Slice(0, sl.out*mr), N, mr, sl.out)
	for i, mod := range sl.mods {
		tmp, dB := ls.tmp.Slice(0, mod.out*r), g.Slice(mod.bOff, mod.out*r)
		be.MatmulForward(tmp, dbbd.Slice(mod.rowOff*mr, mod.out*mr), ls.selT[k][i], backend.Buffer{}, mod.out, mr, r)
		be.Add(dB, dB, tmp, mod.out*r)
	}
	be.MatmulBackward(dxl, g.Slice(sl.aOff, mr*sl.in), backend.Buffer{}, du, x, aCat, N, sl.in, mr)
	be.Add(dx, dx, dxl, N*sl.in)
}

// With lora_dropout, PEFT gives every adapted module its own dropout, so
// modules sharing a fused projection's input see different masks and
// their A's cannot share one GEMM: each module i runs on its own dropped
// input xd_i, u_i = xd_i·A_iᵀ (N, r), and adds u_i·B̂_iᵀ to the output,
// where B̂_i (out, r) holds s·B_i in the module's rows and zeros elsewhere.

// maskSeed is the seed of module i of slot k's mask in the acquired block
// during this pass: forward, checkpointing's recompute and backward draw
// the same.
func (ls *loraState) maskSeed(k, i int) uint64 {
	return backend.DropoutSeed(ls.seed, ls.layer, k, i)
}

// dropIn writes module i of slot k's dropped input into ls.xd (in the
// adapters' dtype) and returns it.
func (m *Model) dropIn(k, i int, x backend.Buffer, N int) backend.Buffer {
	ls := m.lora
	n := N * ls.lay.slots[k].in
	xd := ls.xd.Slice(0, n)
	ls.drop.Dropout(xd, x, ls.p, ls.maskSeed(k, i), n)
	return xd
}

// buildBhat writes B̂ of module i of slot k into ls.bbd from the group w.
func (m *Model) buildBhat(k, i int, w backend.Buffer) backend.Buffer {
	be, ls := m.be, m.lora
	sl, r := &ls.lay.slots[k], ls.lay.lora.R
	mod := sl.mods[i]
	bh := ls.bbd.Slice(0, sl.out*r)
	if mod.out != sl.out {
		be.Zero(bh)
	}
	be.MatmulForward(bh.Slice(mod.rowOff*r, mod.out*r), w.Slice(mod.bOff, mod.out*r), ls.sI, backend.Buffer{}, mod.out, r, r)
	return bh
}

// loraForwardDropout is loraForward in a training pass with dropout.
func (m *Model) loraForwardDropout(k int, out, x, w backend.Buffer, N int) {
	be, ls := m.be, m.lora
	sl, r := &ls.lay.slots[k], ls.lay.lora.R
	u, y := ls.u.Slice(0, N*r), ls.y.Slice(0, N*sl.out)
	for i, mod := range sl.mods {
		xd := m.dropIn(k, i, x, N)
		be.MatmulForward(u, xd, w.Slice(mod.aOff, r*sl.in), backend.Buffer{}, N, sl.in, r)
		be.MatmulForward(y, u, m.buildBhat(k, i, w), backend.Buffer{}, N, r, sl.out)
		be.Add(out, out, y, N*sl.out)
	}
}

// loraBackwardDropout is loraBackward in a training pass with dropout:
// each module's mask is drawn again from the same seed.
func (m *Model) loraBackwardDropout(k int, dx, dout, x, w, g backend.Buffer, N int) {
	be, ls := m.be, m.lora
	sl, r := &ls.lay.slots[k], ls.lay.lora.R
	u, du, dxd := ls.u.Slice(0, N*r), ls.du.Slice(0, N*r), ls.y.Slice(0, N*sl.in)
	dout = ls.castIn(be, ls.df, dout, N*sl.out)
	for i, mod := range sl.mods {
		xd := m.dropIn(k, i, x, N)
		a := w.Slice(mod.aOff, r*sl.in)
		be.MatmulForward(u, xd, a, backend.Buffer{}, N, sl.in, r)
		bh := m.buildBhat(k, i, w)
		dbh := ls.dbbd.Slice(0, sl.out*r)
		be.Zero(dbh)
		be.MatmulBackward(du, dbh, backend.Buffer{}, dout, u, bh, N, r, sl.out)
		tmp, dB := ls.tmp.Slice(0, mod.out*r), g.Slice(mod.bOff, mod.out*r)
		be.MatmulForward(tmp, dbh.Slice(mod.rowOff*r, mod.out*r), ls.sI, backend.Buffer{}, mod.out, r, r)
		be.Add(dB, dB, tmp, mod.out*r)
		be.MatmulBackward(dxd, g.Slice(mod.aOff, r*sl.in), backend.Buffer{}, du, xd, a, N, sl.in, r)
		ls.drop.Dropout(dxd, dxd, ls.p, ls.maskSeed(k, i), N*sl.in)
		be.Add(dx, dx, dxd, N*sl.in)
	}
}

// castIn returns src (n elements) in the adapters' dtype: src itself, or
// its cast into scratch.
func (ls *loraState) castIn(be backend.Backend, scratch, src backend.Buffer, n int) backend.Buffer {
	if !ls.cast {
		return src
	}
	dst := scratch.Slice(0, n)
	be.Copy(dst, src)
	return dst
}

// Train marks the next Forward (and its Backward) as a training pass:
// LoRA's dropout, when the adapters have one, draws that pass's masks from
// seed. A Forward without it (evaluation, sampling) drops nothing, as
// PEFT's dropout in eval mode. Without dropout it changes nothing.
func (m *Model) Train(seed uint64) {
	if m.lora != nil {
		m.lora.armed, m.lora.nextSeed = true, seed
	}
}

// startPass takes up Train's mark for the pass a Forward begins.
func (ls *loraState) startPass() {
	ls.active, ls.seed, ls.armed = ls.armed, ls.nextSeed, false
}

// checkGrads checks the gradient buffer the store gave for group g: the
// zero Buffer means a frozen group, whose views are all the zero Buffer and
// whose ops then skip their weight gradients (no GEMM, no memory), which
// only a model with LoRA adapters may ask for.
func (m *Model) checkGrads(g int, grads backend.Buffer) error {
	if grads.IsNil() && m.lora == nil {
		return fmt.Errorf("model: the store gave no gradient buffer for group %d, and only a model with LoRA adapters trains with a frozen base", g)
	}
	return nil
}

// acquireAdapters acquires block l's adapters (and, for backward, their
// gradients) after the block's base parameters; without adapters it gives
// the zero Buffers.
func (m *Model) acquireAdapters(l int, backward bool) (params, grads backend.Buffer, err error) {
	if m.lora == nil {
		return params, grads, nil
	}
	m.lora.layer = l
	if params, grads, err = m.lora.store.Acquire(l, backward); err != nil {
		return params, grads, m.storeErr("acquire", l+1, backward, fmt.Errorf("LoRA adapters: %w", err))
	}
	if backward && grads.IsNil() {
		return params, grads, fmt.Errorf("model: the adapters' store gave no gradients for block %d", l)
	}
	return params, grads, nil
}

// releaseAdapters ends block l's use of its adapters.
func (m *Model) releaseAdapters(l int, backward bool) error {
	if m.lora == nil {
		return nil
	}
	if err := m.lora.store.Release(l, backward); err != nil {
		return m.storeErr("release", l+1, backward, fmt.Errorf("LoRA adapters: %w", err))
	}
	return nil
}
