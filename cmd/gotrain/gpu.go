package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gotrain/gotrain/backend/cpu"
	cudabe "github.com/gotrain/gotrain/backend/cuda"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/ncclcomm"
	"github.com/gotrain/gotrain/cublas"
	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/kernels"
	"github.com/gotrain/gotrain/launch"
	"github.com/gotrain/gotrain/nccl"
)

// gpuRank is what one rank holds on its GPU: the driver, the device picked
// by LOCAL_RANK, and the CUDA backend (kernels compiled by NVRTC, cuBLAS).
type gpuRank struct {
	drv *cuda.Driver
	dev *cuda.Device
	be  *cudabe.Backend
}

// gpuProbe says whether --device auto should pick CUDA: a driver that
// answers with at least one device, NVRTC and cuBLAS, and NCCL when ranks
// must talk. The error says what is missing.
func gpuProbe(worldSize int) error {
	drv, err := cuda.Load(cuda.Options{})
	if err != nil {
		return err
	}
	n, err := drv.DeviceCount()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("the CUDA driver sees no GPU")
	}
	if _, err := kernels.LoadNVRTC(kernels.NVRTCOptions{}); err != nil {
		return err
	}
	if _, err := cublas.Load(cublas.LoadOptions{}); err != nil {
		return err
	}
	if worldSize > 1 {
		if _, err := nccl.Load(nccl.LoadOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// resolveDevice turns --device into "cpu" or "cuda" for a job of
// worldSize ranks. auto picks cuda when a GPU and its libraries are
// present; note says why it did not.
func resolveDevice(device string, worldSize int) (resolved, note string, err error) {
	switch device {
	case "cpu", "cuda":
		return device, "", nil
	case "auto":
		if perr := gpuProbe(worldSize); perr != nil {
			return "cpu", firstLine(perr.Error()), nil
		}
		return "cuda", "", nil
	}
	return "", "", fmt.Errorf("--device %q: want cpu, cuda or auto", device)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// openGPU opens GPU localRank of the devices the driver shows (the driver
// applies CUDA_VISIBLE_DEVICES, so ordinal 0 is the first visible one) and
// builds the CUDA backend on it; hostThreads sizes the CPU backend that
// runs offloaded optimizer steps.
func openGPU(localRank, hostThreads int, allowTF32 bool) (*gpuRank, error) {
	drv, err := cuda.Load(cuda.Options{})
	if err != nil {
		return nil, fmt.Errorf("--device cuda: %w", err)
	}
	n, err := drv.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("--device cuda: %w", err)
	}
	if localRank >= n {
		vis := os.Getenv("CUDA_VISIBLE_DEVICES")
		if vis == "" {
			vis = "unset"
		}
		return nil, fmt.Errorf("--device cuda: local rank %d needs GPU %d but the driver shows %d (CUDA_VISIBLE_DEVICES=%s); "+
			"start at most %d ranks per node (--nproc-per-node) or make more GPUs visible", localRank, localRank, n, vis, n)
	}
	dev, err := drv.Open(localRank)
	if err != nil {
		return nil, fmt.Errorf("--device cuda: %w", err)
	}
	be, err := newCUDABackend(dev, hostThreads, allowTF32)
	if err != nil {
		_ = dev.Close()
		return nil, err
	}
	return &gpuRank{drv: drv, dev: dev, be: be}, nil
}

// newCUDABackend compiles (or loads from the cache) the kernel program for
// dev and creates the backend.
func newCUDABackend(dev *cuda.Device, hostThreads int, allowTF32 bool) (*cudabe.Backend, error) {
	nv, err := kernels.LoadNVRTC(kernels.NVRTCOptions{})
	if err != nil {
		return nil, fmt.Errorf("--device cuda: %w", err)
	}
	var cache *kernels.Cache
	if dir, derr := kernels.DefaultCacheDir(); derr == nil {
		// No cache is slower start-up, never a failure.
		cache, _ = kernels.OpenCache(dir)
	}
	bl, err := cublas.Load(cublas.LoadOptions{})
	if err != nil {
		return nil, fmt.Errorf("--device cuda: %w", err)
	}
	// cuBLASLt ships with cuBLAS; without it the backend adds biases with
	// its own kernels instead of in the GEMM's epilogue.
	lt, lterr := cublas.LoadLt(cublas.LoadOptions{})
	if lterr != nil {
		lt = nil
	}
	impl, _ := blas.Default(hostThreads)
	be, err := cudabe.New(cudabe.Options{Device: dev, Compiler: kernels.NewCompiler(nv, cache), BLAS: bl, BLASLt: lt,
		Host: cpu.New(cpu.Options{Gemm: impl, Threads: hostThreads}), AllowTF32: allowTF32})
	if err != nil {
		return nil, fmt.Errorf("--device cuda: %w", err)
	}
	return be, nil
}

// Close releases the backend and the device.
func (g *gpuRank) Close() error {
	err := g.be.Close()
	if cerr := g.dev.Close(); err == nil {
		err = cerr
	}
	return err
}

// gpuPeakFLOPS is the dense bf16 tensor-core peak of known GPUs, the
// denominator of MFU as llm.c and nanoGPT report it (no sparsity). A GPU
// missing here reports MFU only with --peak-flops.
func gpuPeakFLOPS(name string) (float64, bool) {
	table := []struct {
		match string
		flops float64
	}{
		{"H200", 989e12},
		{"H100 PCIe", 756e12},
		{"H100", 989e12},
		{"H800", 989e12},
		{"GH200", 989e12},
		{"A100", 312e12},
		{"A800", 312e12},
		{"A10G", 70e12},
		{"A10", 125e12},
		{"L40S", 362e12},
		{"L40", 181e12},
		{"L4", 121e12},
		{"RTX 4090", 165e12},
		{"RTX 3090", 71e12},
		{"RTX A6000", 155e12},
	}
	for _, e := range table {
		if strings.Contains(name, e.match) {
			return e.flops, true
		}
	}
	return 0, false
}

// connectNCCL opens the NCCL communicator of this rank's GPU; the unique
// id travels through the rendezvous store.
func connectNCCL(ctx context.Context, rk launch.Rank, st comm.Store, gpu *gpuRank, timeout time.Duration) (comm.Comm, error) {
	lib, err := nccl.Load(nccl.LoadOptions{})
	if err != nil {
		return nil, fmt.Errorf("--device cuda with %d ranks: %w", rk.WorldSize, err)
	}
	return ncclcomm.New(ctx, ncclcomm.Options{Rank: rk.Rank, Size: rk.WorldSize, Store: st, Device: gpu.dev, Lib: lib,
		Timeout: timeout, ComputeStream: gpu.be.Stream()})
}
