package model

import (
	"fmt"

	"github.com/gotrain/gotrain/backend"
)

// Options choose dtypes and hooks for a Model.
type Options struct {
	ParamDType backend.DType // parameters; zero means F32
	GradDType  backend.DType // gradients (accumulated across micro-batches); zero means F32
	ActDType   backend.DType // activations; zero means ParamDType

	// Store, when set, supplies parameters and gradient buffers group by
	// group (a ZeRO engine); the model then allocates neither, and Params,
	// Grads, SetParams, HostParams, HostGrads and ZeroGrad are not available.
	Store ParamStore

	// Checkpoint turns on activation checkpointing: forward keeps only each
	// block's input and backward recomputes the block from it (DeepSpeed's
	// activation_checkpointing, Hugging Face's gradient checkpointing). The
	// gradients are bit-identical to a run without it. CheckpointPool is
	// where the kept inputs live: Device (default) or HostPinned/Host
	// (cpu_checkpointing).
	Checkpoint     bool
	CheckpointPool backend.Pool
}

// blockWeights are views of one block's tensors in a flat buffer.
type blockWeights struct {
	ln1w, ln1b, qkvw, qkvb, attprojw, attprojb backend.Buffer
	ln2w, ln2b, fcw, fcb, fcprojw, fcprojb     backend.Buffer
}

// pass records what the last Forward left in the activations.
type pass uint8

const (
	passNone     pass = iota
	passLogits        // Forward without targets: logits hold logits
	passLoss          // Forward with targets: logits hold probabilities, losses are set
	passBackward      // Backward ran: logits hold dlogits
)

// Model is a GPT-2 on a Backend: it owns the flat parameter buffer, the
// gradient buffer of the same layout and the activations of the largest
// (B,T) seen so far. A Model is used by one goroutine at a time.
type Model struct {
	be     backend.Backend
	cfg    Config
	layout *Layout
	opts   Options

	params, grads backend.Buffer // (NumParams) each, in the Params and Grads categories; zero with a Store
	store         ParamStore

	acts   *activations
	arenas map[arenaKey]backend.Buffer
	actB   int64 // bytes held by arenas
	state  pass
}

// New allocates a model's parameters (zero until SetParams) and gradients
// (zero) on be's device pool. Activations are allocated by the first
// Forward or by ReserveActivations.
func New(be backend.Backend, cfg Config, opts Options) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.ParamDType == 0 {
		opts.ParamDType = backend.F32
	}
	if opts.GradDType == 0 {
		opts.GradDType = backend.F32
	}
	if opts.ActDType == 0 {
		opts.ActDType = opts.ParamDType
	}
	for _, dt := range []backend.DType{opts.ParamDType, opts.GradDType, opts.ActDType} {
		if !dt.IsFloat() {
			return nil, fmt.Errorf("model: dtype %s is not a float type", dt)
		}
	}
	m := &Model{be: be, cfg: cfg, layout: NewLayout(cfg), opts: opts, arenas: map[arenaKey]backend.Buffer{}}
	if opts.Store != nil {
		m.store = opts.Store
		return m, nil
	}
	n := m.layout.NumParams()
	var err error
	if m.params, err = be.Alloc(backend.Device, backend.Params, opts.ParamDType, n); err != nil {
		return nil, fmt.Errorf("model: parameters (%d × %s): %w", n, opts.ParamDType, err)
	}
	if m.grads, err = be.Alloc(backend.Device, backend.Grads, opts.GradDType, n); err != nil {
		be.Free(m.params)
		return nil, fmt.Errorf("model: gradients (%d × %s): %w", n, opts.GradDType, err)
	}
	m.store = &flatStore{lay: m.layout, params: m.params, grads: m.grads}
	return m, nil
}

// Free releases everything the model allocated. The model is unusable after.
func (m *Model) Free() {
	m.freeActivations()
	if !m.params.IsNil() {
		m.be.Free(m.params)
		m.be.Free(m.grads)
	}
}

// Config is the model's shape.
func (m *Model) Config() Config { return m.cfg }

// Layout is the flat parameter layout of Params and Grads.
func (m *Model) Layout() *Layout { return m.layout }

// Params is the flat parameter buffer (NumParams elements of ParamDType).
// The model owns it; callers (optimizer, ZeRO) may write it between passes.
func (m *Model) Params() backend.Buffer { return m.params }

// Grads is the flat gradient buffer, same layout as Params. Backward adds
// into it; ZeroGrad clears it.
func (m *Model) Grads() backend.Buffer { return m.grads }

// ZeroGrad sets every gradient to zero (with a Store, the store owns the
// gradients and ZeroGrad does nothing).
func (m *Model) ZeroGrad() {
	if !m.grads.IsNil() {
		m.be.Zero(m.grads)
	}
}

var errExternalStore = fmt.Errorf("model: parameters live in the ParamStore given to New, not in the model")

// SetParams uploads host weights in the flat layout (rounded to ParamDType).
func (m *Model) SetParams(host []float32) error {
	if m.params.IsNil() {
		return errExternalStore
	}
	if len(host) != m.layout.NumParams() {
		return fmt.Errorf("model: set parameters: %d values for %d parameters", len(host), m.layout.NumParams())
	}
	if err := backend.WriteF32(m.be, m.params, host); err != nil {
		return fmt.Errorf("model: set parameters: %w", err)
	}
	return nil
}

// HostParams downloads the parameters as float32 in the flat layout.
func (m *Model) HostParams() ([]float32, error) {
	if m.params.IsNil() {
		return nil, errExternalStore
	}
	if err := m.be.Sync(); err != nil {
		return nil, err
	}
	return backend.ReadF32(m.be, m.params)
}

// HostGrads downloads the gradients as float32 in the flat layout.
func (m *Model) HostGrads() ([]float32, error) {
	if m.grads.IsNil() {
		return nil, errExternalStore
	}
	if err := m.be.Sync(); err != nil {
		return nil, err
	}
	return backend.ReadF32(m.be, m.grads)
}

// ReserveActivations allocates activations for batches up to (B,T) now, so
// memory is accounted before the first step.
func (m *Model) ReserveActivations(B, T int) error {
	if B < 1 || T < 1 || T > m.cfg.MaxT {
		return fmt.Errorf("model: batch %d×%d: want B ≥ 1 and 1 ≤ T ≤ %d", B, T, m.cfg.MaxT)
	}
	a := &activations{}
	plan := planActivations(a, m.cfg, B, T, m.opts.ActDType, m.opts.Checkpoint, m.opts.CheckpointPool)
	fits := true
	for k, n := range plan.need {
		if m.arenas[k].Len() < n {
			fits = false
		}
	}
	if !fits {
		m.freeActivations()
		for k, n := range plan.need {
			buf, err := m.be.Alloc(k.pool, backend.Activations, k.dt, n)
			if err != nil {
				m.freeActivations()
				return fmt.Errorf("model: activations for B=%d T=%d (%d MiB): %w", B, T, plan.bytes()>>20, err)
			}
			m.arenas[k] = buf
		}
		m.actB = plan.bytes()
	}
	for _, s := range plan.slots {
		*s.dst = m.arenas[s.key].Slice(s.off, s.n)
	}
	m.acts = a
	m.state = passNone
	return nil
}

func (m *Model) freeActivations() {
	for k, buf := range m.arenas {
		m.be.Free(buf)
		delete(m.arenas, k)
	}
	m.acts, m.actB, m.state = nil, 0, passNone
}

// ActivationBytes is the memory the model holds for activations now.
func (m *Model) ActivationBytes() int64 { return m.actB }

// Logits is the (B,T,Vp) F32 output of the last Forward. After a Forward
// with targets it holds probabilities, and after Backward the gradient
// w.r.t. the logits: the three share memory. Columns V..Vp-1 are padding.
func (m *Model) Logits() backend.Buffer {
	if m.acts == nil {
		return backend.Buffer{}
	}
	return m.acts.logits
}

// LastLogits returns the V logits of sequence b's last position after a
// Forward without targets (for sampling).
func (m *Model) LastLogits(b int) ([]float32, error) {
	if m.state != passLogits {
		return nil, fmt.Errorf("model: last logits need a Forward without targets first")
	}
	a := m.acts
	if b < 0 || b >= a.B {
		return nil, fmt.Errorf("model: last logits of sequence %d, batch has %d", b, a.B)
	}
	if err := m.be.Sync(); err != nil {
		return nil, err
	}
	row := (b*a.T + a.T - 1) * m.cfg.Vp
	return backend.ReadF32(m.be, a.logits.Slice(row, m.cfg.V))
}

// Losses returns the (B,T) per-token losses of the last Forward with targets.
func (m *Model) Losses() ([]float32, error) {
	if m.state != passLoss && m.state != passBackward {
		return nil, fmt.Errorf("model: losses need a Forward with targets first")
	}
	if err := m.be.Sync(); err != nil {
		return nil, err
	}
	return backend.ReadF32(m.be, m.acts.losses)
}
