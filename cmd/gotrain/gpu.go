package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gotrain/gotrain/backend/cpu"
	cudabe "github.com/gotrain/gotrain/backend/cuda"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/ncclcomm"
	"github.com/gotrain/gotrain/cublas"
	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/internal/libsearch"
	"github.com/gotrain/gotrain/kernels"
	"github.com/gotrain/gotrain/launch"
	"github.com/gotrain/gotrain/metrics"
	"github.com/gotrain/gotrain/nccl"
)

// gpuRank is what one rank holds on its GPU: the driver, the device picked
// by LOCAL_RANK, and the CUDA backend (kernels compiled by NVRTC, cuBLAS).
type gpuRank struct {
	drv *cuda.Driver
	dev *cuda.Device
	be  *cudabe.Backend
}

// gpuProbe says whether --device auto can use CUDA: a driver that answers
// with at least one device, NVRTC and cuBLAS, and NCCL when ranks must
// talk. present says a GPU is there (the driver counts one, or a device
// node or NVML shows one) even when err says what keeps CUDA from working.
func gpuProbe(worldSize int) (present bool, err error) {
	drv, derr := cuda.Load(cuda.Options{})
	if derr == nil {
		n, err := drv.DeviceCount()
		if err != nil {
			return true, err
		}
		if n > 0 {
			return true, checkCUDALibs(drv, worldSize)
		}
		derr = fmt.Errorf("the CUDA driver %s sees no GPU", drv.VersionString())
		if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
			// The user hid the GPUs: the CPU is what was asked for.
			return false, fmt.Errorf("%w (CUDA_VISIBLE_DEVICES=%q)", derr, v)
		}
	}
	if where := gpuPresent(); where != "" {
		return true, fmt.Errorf("%s shows a GPU but %w", where, derr)
	}
	return false, derr
}

// checkCUDALibs loads every library a GPU rank needs, found for drv's CUDA
// version, and returns the first that cannot be used.
func checkCUDALibs(drv *cuda.Driver, worldSize int) error {
	search := libsearch.FromEnv(drv.Version())
	if _, err := kernels.LoadNVRTC(kernels.NVRTCOptions{Search: search}); err != nil {
		return err
	}
	if _, err := cublas.Load(cublas.LoadOptions{Search: search}); err != nil {
		return err
	}
	if worldSize > 1 {
		if _, err := nccl.Load(nccl.LoadOptions{Search: search}); err != nil {
			return err
		}
	}
	return nil
}

// EnvDevDir names the directory searched for NVIDIA device nodes instead of
// /dev: a test hook, so the refusal below can be tested with a plain file
// standing in for /dev/nvidia0.
const EnvDevDir = "GOTRAIN_DEV_DIR"

// gpuPresent says where a GPU shows without CUDA: a device node
// (/dev/nvidia0, ...), or NVML counting one. "" when neither does.
func gpuPresent() string {
	dir := os.Getenv(EnvDevDir)
	if dir == "" {
		dir = "/dev"
	}
	if nodes, _ := filepath.Glob(filepath.Join(dir, "nvidia[0-9]*")); len(nodes) > 0 {
		return nodes[0]
	}
	if os.Getenv(EnvDevDir) != "" {
		return "" // the hook replaces every look at the real machine
	}
	if rep, err := metrics.QueryDefaultNVML(""); err == nil && len(rep.GPUs) > 0 {
		return fmt.Sprintf("NVML (%d GPU(s), driver %s)", len(rep.GPUs), rep.DriverVersion)
	}
	return ""
}

// resolveDevice turns --device into "cpu" or "cuda" for a job of
// worldSize ranks. auto picks cuda when a GPU and its libraries are
// present, and the CPU when no GPU is (note says so); a GPU that is
// present but unusable is an error naming what is missing, never a quiet
// CPU run.
func resolveDevice(device string, worldSize int) (resolved, note string, err error) {
	switch device {
	case "cpu", "cuda":
		return device, "", nil
	case "auto":
		present, perr := gpuProbe(worldSize)
		switch {
		case perr == nil:
			return "cuda", "", nil
		case present:
			return "", "", fmt.Errorf("--device auto: this machine has a GPU but gotrain cannot use it: %w\n"+
				"(`gotrain doctor` lists every library file searched; pass --device cpu to train on the CPU anyway)", perr)
		}
		return "cpu", firstLine(perr.Error()), nil
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
	search := libsearch.FromEnv(dev.Driver().Version())
	nv, err := kernels.LoadNVRTC(kernels.NVRTCOptions{Search: search})
	if err != nil {
		return nil, fmt.Errorf("--device cuda: %w", err)
	}
	var cache *kernels.Cache
	if dir, derr := kernels.DefaultCacheDir(); derr == nil {
		// No cache is slower start-up, never a failure.
		cache, _ = kernels.OpenCache(dir)
	}
	bl, err := cublas.Load(cublas.LoadOptions{Search: search})
	if err != nil {
		return nil, fmt.Errorf("--device cuda: %w", err)
	}
	// cuBLASLt ships with cuBLAS; without it the backend adds biases with
	// its own kernels instead of in the GEMM's epilogue.
	lt, lterr := bl.LoadLt(cublas.LoadOptions{Search: search})
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

// connectNCCL opens the NCCL communicator of this rank's GPU; the unique
// id travels through the rendezvous store.
func connectNCCL(ctx context.Context, rk launch.Rank, st comm.Store, gpu *gpuRank, timeout time.Duration) (comm.Comm, error) {
	lib, err := nccl.Load(nccl.LoadOptions{Search: libsearch.FromEnv(gpu.dev.Driver().Version())})
	if err != nil {
		return nil, fmt.Errorf("--device cuda with %d ranks: %w", rk.WorldSize, err)
	}
	return ncclcomm.New(ctx, ncclcomm.Options{Rank: rk.Rank, Size: rk.WorldSize, Store: st, Device: gpu.dev, Lib: lib,
		Timeout: timeout, ComputeStream: gpu.be.Stream()})
}
