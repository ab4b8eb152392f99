package comm_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/comm"
)

func TestSoloIsTheOneRankIdentity(t *testing.T) {
	be := cpu.New(cpu.Options{Gemm: blas.Gonum{}})
	s := comm.NewSolo(be)
	ctx := context.Background()
	src, _ := be.Alloc(backend.Device, backend.Comm, backend.F32, 5)
	dst, _ := be.Alloc(backend.Device, backend.Comm, backend.F32, 5)
	in := []float32{1, -2, 3.5, 0, 7}
	if err := backend.WriteF32(be, src, in); err != nil {
		t.Fatal(err)
	}
	for _, op := range []comm.Op{comm.Sum, comm.Avg, comm.Max} {
		if err := s.AllReduce(ctx, src, op); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ReduceScatter(ctx, dst, src, comm.Sum); err != nil {
		t.Fatal(err)
	}
	got, _ := backend.ReadF32(be, dst)
	if !reflect.DeepEqual(got, in) {
		t.Errorf("reduce-scatter over one rank: %v, want %v", got, in)
	}
	be.Zero(dst)
	if err := s.AllGather(ctx, dst, src); err != nil {
		t.Fatal(err)
	}
	if got, _ := backend.ReadF32(be, dst); !reflect.DeepEqual(got, in) {
		t.Errorf("all-gather over one rank: %v, want %v", got, in)
	}
	reason := errors.New("stop")
	s.Abort(reason)
	var ae *comm.AbortedError
	if err := s.Barrier(ctx); !errors.As(err, &ae) || !errors.Is(ae.Reason, reason) {
		t.Errorf("after Abort: %v", err)
	}
}
