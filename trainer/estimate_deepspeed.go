package trainer

import (
	"strings"

	"github.com/gotrain/gotrain/model"
)

// DeepSpeedEstimate is what DeepSpeed's model-states estimator reports for
// a run: estimate_zero2_model_states_mem_needs (stages 1 and 2,
// deepspeed/runtime/zero/stage_1_and_2.py) or
// estimate_zero3_model_states_mem_needs (stage 3, zero/stage3.py, with
// zero_init, which is how gotrain builds a stage-3 model). It counts
// parameters, gradients and optimizer states only — no activations or
// buffers — assumes 16-bit parameters, and pads its host number with a
// buffer factor of 1.5.
type DeepSpeedEstimate struct {
	Function           string `json:"function"`
	LargestLayerParams int64  `json:"largest_layer_params"` // stage 3: the largest module's own parameters
	DevicePerRank      int64  `json:"device_per_rank"`
	HostPerNode        int64  `json:"host_per_node"`
}

// dsBufferFactor is DeepSpeed's additional_buffer_factor default.
const dsBufferFactor = 1.5

// deepSpeedEstimate evaluates DeepSpeed's formulas for Ψ = the layout's
// parameters over world ranks on nodes nodes:
//
//	zero2, cpu_offload:     GPU 2Ψ,                 CPU Ψ·max(4·N, 16)·1.5
//	zero2, no offload:      GPU 4Ψ + ⌊16Ψ/N⌋,       CPU 4Ψ·(N/nodes)·1.5
//	zero3, params+opt:      GPU 4·LL,               CPU 18Ψ/nodes·1.5
//	zero3, opt offload:     GPU 4·LL + ⌊2Ψ/N⌋,      CPU 16Ψ/nodes·1.5
//	zero3, no offload:      GPU 4·LL + ⌊18Ψ/N⌋,     CPU 4·LL·(N/nodes)·1.5
//
// where LL is the largest layer's parameter count. Stage 0 has no
// estimator (nil).
func deepSpeedEstimate(lay *model.Layout, stage, world, nodes int, offOpt, offParam bool) *DeepSpeedEstimate {
	psi := float64(lay.NumParams())
	n, perNode := float64(world), float64(world/nodes)
	var d DeepSpeedEstimate
	switch stage {
	case 1, 2:
		d.Function = "estimate_zero2_model_states_mem_needs"
		if offOpt {
			d.DevicePerRank = int64(2 * psi)
			d.HostPerNode = int64(psi * max(4*n, 16) * dsBufferFactor)
		} else {
			d.DevicePerRank = int64(4*psi) + int64(16*psi/n)
			d.HostPerNode = int64(psi * 4 * perNode * dsBufferFactor)
		}
	case 3:
		d.Function = "estimate_zero3_model_states_mem_needs"
		ll := largestLayer(lay)
		d.LargestLayerParams = ll
		llMem := 4 * ll
		nodesF := float64(nodes)
		switch {
		case offOpt && offParam:
			d.DevicePerRank = llMem
			d.HostPerNode = int64(psi * 18 / nodesF * dsBufferFactor)
		case offOpt:
			d.DevicePerRank = llMem + int64(2*psi/n)
			d.HostPerNode = int64(psi * 16 / nodesF * dsBufferFactor)
		default:
			d.DevicePerRank = llMem + int64(18*psi/n)
			d.HostPerNode = int64(float64(ll) * 4 * perNode * dsBufferFactor)
		}
	default:
		return nil
	}
	return &d
}

// largestLayer is the most parameters one module owns directly, as
// DeepSpeed counts them (module.parameters(recurse=False)): a module's
// tensors share a name up to ".weight" or ".bias", e.g. an embedding, or
// a block's MLP projection with its weight and bias.
func largestLayer(lay *model.Layout) int64 {
	per := map[string]int64{}
	var best int64
	for _, t := range lay.Tensors() {
		mod := t.Name
		if i := strings.LastIndexByte(mod, '.'); i >= 0 {
			mod = mod[:i]
		}
		per[mod] += int64(t.Len)
		best = max(best, per[mod])
	}
	return best
}
