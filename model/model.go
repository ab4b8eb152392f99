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

	// LoRA, when set, trains adapters (lora.go) on a frozen base: Store
	// then serves the base, and may give no gradient buffers for it.
	LoRA *LoRAOptions
}

// blockWeights are views of one block's tensors in a group buffer, fused
// where the forward pass multiplies them as one matrix. Absent tensors
// (RMSNorm's bias, biases a config leaves out, q/k norms outside Qwen3)
// are the zero Buffer.
type blockWeights struct {
	ln1w, ln1b   backend.Buffer // (C)
	qkvw, qkvb   backend.Buffer // (QKV, C), (QKV): q, k and v stacked
	qnorm, knorm backend.Buffer // (HD) each
	ow, ob       backend.Buffer // (C, A), (C)
	ln2w, ln2b   backend.Buffer // (C)
	upw, upb     backend.Buffer // (U, C), (U): c_fc, or gate_proj and up_proj stacked
	downw, downb backend.Buffer // (C, F), (C)
	lora         backend.Buffer // the block's adapter group (LoRA only)
}

// pass records what the last Forward left in the activations.
type pass uint8

const (
	passNone     pass = iota
	passLogits        // Forward without targets: logits hold logits
	passLoss          // Forward with targets: logits hold logits, losses are set
	passBackward      // Backward ran: logits hold dlogits
)

// Model is a decoder of the family (Config) on a Backend: its parameters
// and gradients come from a ParamStore group by group, and it owns the
// activations of the largest (B,T) seen so far. A Model is used by one
// goroutine at a time.
type Model struct {
	be     backend.Backend
	dec    backend.DecoderOps // the family's ops; nil for GPT-2
	cfg    Config
	layout *Layout
	opts   Options
	store  ParamStore
	eps    float32 // the RMSNorms' epsilon

	acts   *activations
	arenas map[arenaKey]backend.Buffer
	actB   int64   // bytes held by arenas
	pads   []int32 // positions of the last Forward's inputs holding PadID
	// ignored are the [start, end) runs of the last Forward's negative
	// (ignored) targets; tgDev is the targets as uploaded (ignored → 0).
	ignored [][2]int32
	tgDev   []int32
	state   pass
	lora    *loraState // nil without adapters
}

// New makes a model whose parameters and gradients opts.Store supplies.
// Activations are allocated by the first Forward or by ReserveActivations.
// The Llama family needs a backend with backend.DecoderOps.
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
	m := &Model{be: be, cfg: cfg, layout: NewLayout(cfg), opts: opts, store: opts.Store, arenas: map[arenaKey]backend.Buffer{}}
	if cfg.Arch != ArchGPT2 {
		dec, ok := be.(backend.DecoderOps)
		if !ok {
			return nil, fmt.Errorf("model: %s needs RMSNorm, rotary embeddings and SwiGLU, which the %s backend does not have yet "+
				"(only GPT-2 runs there); train %s models with --device cpu for now", cfg.Arch, be.Name(), cfg.Arch)
		}
		m.dec, m.eps = dec, float32(cfg.NormEps)
	}
	if opts.LoRA != nil {
		ls, err := newLoRA(be, cfg, opts.LoRA, opts.ActDType)
		if err != nil {
			return nil, err
		}
		m.lora = ls
	}
	return m, nil
}

// Free releases the activations. The model is unusable after; the store
// keeps the parameters.
func (m *Model) Free() {
	m.freeActivations()
	if m.lora != nil {
		m.lora.free(m.be)
	}
}

// Config is the model's shape.
func (m *Model) Config() Config { return m.cfg }

// Layout is the flat parameter layout the store's buffers follow.
func (m *Model) Layout() *Layout { return m.layout }

// ReserveActivations allocates activations for batches up to (B,T) now, so
// memory is accounted before the first step.
func (m *Model) ReserveActivations(B, T int) error {
	if B < 1 {
		return fmt.Errorf("model: batch %d×%d: want B ≥ 1", B, T)
	}
	if err := m.cfg.CheckSeqLen(T); err != nil {
		return fmt.Errorf("model: %w", err)
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
	plan.place(m.arenas)
	if m.lora != nil {
		if err := m.lora.reserve(m.be, m.opts.ActDType, B*T); err != nil {
			return err
		}
	}
	m.acts = a
	m.state = passNone
	if m.cfg.Pos == RotaryPositions {
		cos, sin := RopeTables(m.cfg, T)
		if err := backend.WriteF32(m.be, a.cos, cos); err != nil {
			return fmt.Errorf("model: upload RoPE tables: %w", err)
		}
		if err := backend.WriteF32(m.be, a.sin, sin); err != nil {
			return fmt.Errorf("model: upload RoPE tables: %w", err)
		}
	}
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

// Logits is the (B,T,Vp) output of the last Forward, in the activations'
// dtype; after Backward it holds the gradient w.r.t. the logits (the
// two share memory). With activation checkpointing it is the zero Buffer
// (logits are recomputed chunk by chunk). Columns V..Vp-1 are GPT-2's
// padding.
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

// Losses returns the (B,T) per-token losses of the last Forward with
// targets; an ignored target's loss is 0.
func (m *Model) Losses() ([]float32, error) {
	if m.state != passLoss && m.state != passBackward {
		return nil, fmt.Errorf("model: losses need a Forward with targets first")
	}
	if err := m.be.Sync(); err != nil {
		return nil, err
	}
	l, err := backend.ReadF32(m.be, m.acts.losses)
	if err != nil {
		return nil, err
	}
	for _, r := range m.ignored {
		clear(l[r[0]:r[1]])
	}
	return l, nil
}
