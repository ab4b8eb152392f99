// Package costmodel is a roofline cost model of a training step on a GPU
// that no machine here has: it takes the op trace of a real step on the
// accounting backend (backend/meta with Options.Trace), maps every traced
// op to the kernels, GEMMs and copies the CUDA backend launches for it,
// each with its FLOPs and its DRAM (or PCIe) bytes, and prices each part
// at the chosen GPU's published peak: time = max(FLOPs / peak, bytes /
// bandwidth), parts run one after another on one stream.
//
// It is a design aid, never a measurement. Every number it produces is an
// upper bound on what the hardware can do with gotrain's current kernels
// (a lower bound on step time): real kernels reach neither the peak FLOP/s
// nor the peak bandwidth, launches and host synchronisations cost time the
// model leaves out, and caches can only lower the bytes it counts (each
// operand is counted once per pass over it, as if nothing stayed in L2).
// Report.Write labels every line "cost model (upper bound), not a
// measurement".
//
// The per-op formulas reflect what backend/cuda launches today (for
// example attention's chunked GEMMs with the causal skip of key columns,
// cross-entropy reading the logits twice, the bias written before a GEMM
// that adds onto it); when that code changes, the formulas here change
// with it. Ops the model has no formula for still count the bytes of
// their arguments and are flagged, so a new model family's ops are priced
// (as memory-bound kernels) before anyone writes their formula.
//
// It also holds gotrain's one table of GPU peaks: the priced GPUs by key,
// and by the driver's device name the dense bf16 peak that MFU is reported
// against (DeviceGPU).
//
// It is a package of its own because it imports only backend,
// backend/attnplan and backend/meta, all pure Go, so the gotrain command
// (bench --dry-run) and tests use it without cgo, and neither trainer nor
// backend/cuda grows a dependency.
package costmodel
