package costmodel

import (
	"fmt"
	"strings"
)

// GPU is one GPU's published peaks, dense (no 2:4 sparsity), in FLOP/s and
// bytes/s.
type GPU struct {
	Key  string // what --gpu takes: "h100"
	Name string
	// BF16 is the bf16 tensor-core peak with fp32 accumulation: bf16 GEMMs.
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

// GPUs are the GPUs the model knows, from NVIDIA's datasheets (the README
// lists them with the secondary sources they were checked against).
func GPUs() []GPU {
	return []GPU{
		{Key: "h100", Name: "NVIDIA H100 SXM5 80GB", BF16: 989e12, TF32: 494e12, FP32: 67e12, Memory: 3.35e12, PCIe: 64e9,
			Source: "NVIDIA H100 Tensor Core GPU datasheet (SXM column; bf16 1,979 and TF32 989 TFLOP/s are with sparsity, halved here)"},
		{Key: "h200", Name: "NVIDIA H200 SXM 141GB", BF16: 989e12, TF32: 494e12, FP32: 67e12, Memory: 4.8e12, PCIe: 64e9,
			Source: "NVIDIA H200 Tensor Core GPU datasheet (SXM column; bf16 1,979 and TF32 989 TFLOP/s are with sparsity, halved here; 4.8 TB/s HBM3e)"},
		{Key: "a100", Name: "NVIDIA A100 SXM4 80GB", BF16: 312e12, TF32: 156e12, FP32: 19.5e12, Memory: 2.039e12, PCIe: 32e9,
			Source: "NVIDIA A100 Tensor Core GPU datasheet (80GB SXM column)"},
		{Key: "l40", Name: "NVIDIA L40 48GB", BF16: 181e12, TF32: 90.5e12, FP32: 90.5e12, Memory: 864e9, PCIe: 32e9,
			Source: "NVIDIA L40 GPU datasheet (bf16 362 and TF32 181 TFLOP/s are with sparsity, halved here)"},
	}
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
