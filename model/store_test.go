package model

import (
	"context"
	"errors"
	"fmt"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/zero"
)

// tmodel is a Model on a one-rank, stage-0 ZeRO engine (what a single
// process trains with), with the helpers the tests use.
type tmodel struct {
	*Model
	eng *zero.Engine
}

// newTestModel makes a model whose parameters are stored as pdt (zero:
// F32) with fp32 gradients.
func newTestModel(be backend.Backend, cfg Config, opts Options, pdt backend.DType) (*tmodel, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	zo := zero.DefaultOptions(0)
	zo.ParamDType = pdt
	eng, err := zero.New(context.Background(), be, comm.NewSolo(be), zero.LayoutOf(NewLayout(cfg)), zo)
	if err != nil {
		return nil, err
	}
	opts.Store = eng
	m, err := New(be, cfg, opts)
	if err != nil {
		eng.Close()
		return nil, err
	}
	return &tmodel{Model: m, eng: eng}, nil
}

// SetParams uploads host weights in the flat layout.
func (m *tmodel) SetParams(host []float32) error {
	lay := m.Layout()
	if len(host) != lay.NumParams() {
		return fmt.Errorf("%d values for %d parameters", len(host), lay.NumParams())
	}
	return m.eng.InitParams(func(g int) ([]float32, error) {
		off, n := lay.GroupRange(g)
		return host[off : off+n], nil
	})
}

// HostGrads is the gradients accumulated since the last ZeroGrad.
func (m *tmodel) HostGrads() ([]float32, error) { return m.eng.HostGrads() }

// ZeroGrad clears the gradients.
func (m *tmodel) ZeroGrad() {
	if err := m.eng.ZeroGrad(); err != nil {
		panic(err)
	}
}

// Free releases the model's activations and the engine's buffers.
func (m *tmodel) Free() {
	m.Model.Free()
	m.eng.Close()
}

// recordingStore passes calls on to a store and records their order.
type recordingStore struct {
	ParamStore
	calls  []string
	failAt string
}

func (s *recordingStore) log(call string) error {
	s.calls = append(s.calls, call)
	if call == s.failAt {
		return errors.New("gather failed")
	}
	return nil
}

func (s *recordingStore) Acquire(g int, bw bool) (backend.Buffer, backend.Buffer, error) {
	if err := s.log(fmt.Sprintf("A%d%s", g, pass2(bw))); err != nil {
		return backend.Buffer{}, backend.Buffer{}, err
	}
	return s.ParamStore.Acquire(g, bw)
}

func (s *recordingStore) Release(g int, bw bool) error {
	if err := s.log(fmt.Sprintf("R%d%s", g, pass2(bw))); err != nil {
		return err
	}
	return s.ParamStore.Release(g, bw)
}

func pass2(backward bool) string {
	if backward {
		return "b"
	}
	return "f"
}
