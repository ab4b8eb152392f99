package main

import (
	"github.com/gotrain/gotrain/cublas"
	"github.com/gotrain/gotrain/nccl"
)

// doctorCUBLAS loads cuBLAS, and cuBLASLt beside it (the fused-epilogue
// GEMMs use it), as training would. Loading needs no GPU, so a machine with
// the libraries but no device still reports their versions.
func doctorCUBLAS() doctorLib {
	lib := doctorLib{Name: "cublas"}
	l, err := cublas.Load(cublas.LoadOptions{})
	if err != nil {
		lib.Err = err.Error()
		return lib
	}
	lib.Version, lib.Path = l.Version().String(), l.Path()
	if lt, err := cublas.LoadLt(cublas.LoadOptions{}); err != nil {
		lib.Err = err.Error()
	} else {
		lib.Version += ", cuBLASLt " + lt.Version().String()
	}
	return lib
}

// doctorNCCL loads NCCL and says whether it is new enough for bf16
// gradients and the avg reduction (2.10.3).
func doctorNCCL() doctorLib {
	lib := doctorLib{Name: "nccl"}
	l, err := nccl.Load(nccl.LoadOptions{})
	if err != nil {
		lib.Err = err.Error()
		return lib
	}
	lib.Version, lib.Path = l.Version().String(), l.Path()
	if !l.Version().AtLeast(2, 10, 3) {
		lib.Err = "NCCL " + lib.Version + " predates 2.10.3: bf16 collectives and the avg reduction are unavailable; install libnccl2 2.10.3 or later"
	}
	return lib
}
