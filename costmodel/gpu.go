package costmodel

import (
	"fmt"
	"strings"
)

// GPU is one GPU's published peaks, dense (no 2:4 sparsity), in FLOP/s and
// bytes/s. GPUs the cost model prices have every field; the others are
// known only by their bf16 peak, the denominator of MFU, and have no Key.
type GPU struct {
	Key  string // what --gpu takes: "h100"; empty where only BF16 is known
	Name string
	// Match is the part of the driver's device name that identifies the
	// GPU ("H100 PCIe" in "NVIDIA H100 PCIe"); DeviceGPU takes the longest
	// that matches.
	Match string
	// BF16 is the bf16 tensor-core peak with fp32 accumulation: bf16 GEMMs,
	// and the peak MFU is reported against, as llm.c and nanoGPT do.
	BF16 float64
	// TF32 is the TF32 tensor-core peak. gotrain's fp32 GEMMs ask for
	// CUBLAS_COMPUTE_32F (true fp32, to match the CPU), which does not use
	// it; it is listed for comparison only.
	TF32 float64
	// FP32 is the fp32 peak of the CUDA cores: fp32 GEMMs and every
	// kernel's arithmetic.
	FP32 float64
	// Memory is the device memory bandwidth.
	Memory float64
	// PCIe is the host link's bandwidth in one direction.
	PCIe float64
	// Source names the datasheet the numbers come from.
	Source string
}

// gpuTable is every GPU gotrain knows, from NVIDIA's datasheets (the
// README lists the priced ones with the secondary sources they were
// checked against): first the ones the cost model prices, then the ones
// known only by their dense bf16 peak.
func gpuTable() []GPU {
	return []GPU{
		{Key: "h100", Name: "NVIDIA H100 SXM5 80GB", Match: "H100", BF16: 989e12, TF32: 494e12, FP32: 67e12, Memory: 3.35e12, PCIe: 64e9,
			Source: "NVIDIA H100 Tensor Core GPU datasheet (SXM column; bf16 1,979 and TF32 989 TFLOP/s are with sparsity, halved here)"},
		{Key: "h200", Name: "NVIDIA H200 SXM 141GB", Match: "H200", BF16: 989e12, TF32: 494e12, FP32: 67e12, Memory: 4.8e12, PCIe: 64e9,
			Source: "NVIDIA H200 Tensor Core GPU datasheet (SXM column; bf16 1,979 and TF32 989 TFLOP/s are with sparsity, halved here; 4.8 TB/s HBM3e)"},
		{Key: "a100", Name: "NVIDIA A100 SXM4 80GB", Match: "A100", BF16: 312e12, TF32: 156e12, FP32: 19.5e12, Memory: 2.039e12, PCIe: 32e9,
			Source: "NVIDIA A100 Tensor Core GPU datasheet (80GB SXM column)"},
		{Key: "l40", Name: "NVIDIA L40 48GB", Match: "L40", BF16: 181e12, TF32: 90.5e12, FP32: 90.5e12, Memory: 864e9, PCIe: 32e9,
			Source: "NVIDIA L40 GPU datasheet (bf16 362 and TF32 181 TFLOP/s are with sparsity, halved here)"},
		{Name: "NVIDIA H100 PCIe", Match: "H100 PCIe", BF16: 756e12},
		{Name: "NVIDIA H800", Match: "H800", BF16: 989e12},
		{Name: "NVIDIA GH200", Match: "GH200", BF16: 989e12},
		{Name: "NVIDIA A800", Match: "A800", BF16: 312e12},
		{Name: "NVIDIA A10G", Match: "A10G", BF16: 70e12},
		{Name: "NVIDIA A10", Match: "A10", BF16: 125e12},
		{Name: "NVIDIA L40S", Match: "L40S", BF16: 362e12},
		{Name: "NVIDIA L4", Match: "L4", BF16: 121e12},
		{Name: "NVIDIA GeForce RTX 4090", Match: "RTX 4090", BF16: 165e12},
		{Name: "NVIDIA GeForce RTX 3090", Match: "RTX 3090", BF16: 71e12},
		{Name: "NVIDIA RTX A6000", Match: "RTX A6000", BF16: 155e12},
	}
}

// GPUs are the GPUs the cost model prices (those with a Key).
func GPUs() []GPU {
	var out []GPU
	for _, g := range gpuTable() {
		if g.Key != "" {
			out = append(out, g)
		}
	}
	return out
}

// LookupGPU returns the GPU whose Key is key (case-insensitive).
func LookupGPU(key string) (GPU, error) {
	var keys []string
	for _, g := range GPUs() {
		if strings.EqualFold(g.Key, key) {
			return g, nil
		}
		keys = append(keys, g.Key)
	}
	return GPU{}, fmt.Errorf("costmodel: unknown GPU %q: want one of %s", key, strings.Join(keys, ", "))
}

// DeviceGPU returns the GPU a driver's device name ("NVIDIA H100 80GB
// HBM3") names: the entry whose Match is the longest part of the name, so
// "H100 PCIe" wins over "H100" and "L40S" over "L40"; false when none
// matches (MFU then needs a peak from the user).
func DeviceGPU(name string) (GPU, bool) {
	var best GPU
	for _, g := range gpuTable() {
		if strings.Contains(name, g.Match) && len(g.Match) > len(best.Match) {
			best = g
		}
	}
	return best, best.Match != ""
}

// peak is the FLOP/s of u on g (0 for units that do no arithmetic).
func (g GPU) peak(u Unit) float64 {
	switch u {
	case TensorBF16:
		return g.BF16
	case CUDACores:
		return g.FP32
	}
	return 0
}

// bandwidth is the bytes/s of the memory u's bytes cross.
func (g GPU) bandwidth(u Unit) float64 {
	if u == Link {
		return g.PCIe
	}
	return g.Memory
}
