package model

import (
	"fmt"

	"github.com/gotrain/gotrain/backend"
)

// Options choose dtypes and hooks for a Model.
type Options struct {
	// ActDType is the activations' storage type (zero: F32). The store
	// decides the parameters' and gradients' types.
	ActDType backend.DType

	// Store supplies the parameters and gradient buffers group by group: a
	// ZeRO engine (zero.Engine; one rank at stage 0 for a single process).
	// It is required: the model allocates activations only.
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

// Model is a GPT-2 on a Backend: its parameters and gradients come from a
// ParamStore group by group, and it owns the activations of the largest
// (B,T) seen so far. A Model is used by one goroutine at a time.
type Model struct {
	be     backend.Backend
	cfg    Config
	layout *Layout
	opts   Options
	store  ParamStore

	acts   *activations
	arenas map[arenaKey]backend.Buffer
	actB   int64 // bytes held by arenas
	state  pass
}

// New makes a model whose parameters and gradients opts.Store supplies.
// Activations are allocated by the first Forward or by ReserveActivations.
func New(be backend.Backend, cfg Config, opts Options) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Store == nil {
		return nil, fmt.Errorf("model: no ParamStore: parameters come from a ZeRO engine (zero.New; one rank at stage 0 for a single process)")
	}
	if opts.ActDType == 0 {
		opts.ActDType = backend.F32
	}
	if !opts.ActDType.IsFloat() {
		return nil, fmt.Errorf("model: activation dtype %s is not a float type", opts.ActDType)
	}
	return &Model{be: be, cfg: cfg, layout: NewLayout(cfg), opts: opts, store: opts.Store, arenas: map[arenaKey]backend.Buffer{}}, nil
}

// Free releases the activations. The model is unusable after; the store
// keeps the parameters.
func (m *Model) Free() { m.freeActivations() }

// Config is the model's shape.
func (m *Model) Config() Config { return m.cfg }

// Layout is the flat parameter layout the store's buffers follow.
func (m *Model) Layout() *Layout { return m.layout }

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
