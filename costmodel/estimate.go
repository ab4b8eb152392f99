package costmodel

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/gotrain/gotrain/backend/meta"
)

// Label starts every line Report.Write prints: these numbers are a model's.
const Label = "cost model (upper bound), not a measurement"

// OpCost is one op's share of a step: every traced call of it together.
type OpCost struct {
	Op       string
	Calls    int     // traced calls
	Launches int     // kernel launches, GEMM calls and copies they make
	FLOPs    float64 // total
	Bytes    float64 // device memory (and host link) bytes
	Seconds  float64 // roofline time at the GPU's peaks
	// MemoryBound is the part of Seconds where bandwidth, not arithmetic,
	// set the time.
	MemoryBound float64
	Modelled    bool // false: no formula (priced as a streaming kernel)
	Host        bool // the op ran on the host CPU (offloaded): no GPU time
}

// Report is a step's modelled cost on one GPU.
type Report struct {
	GPU GPU
	Ops []OpCost // by Seconds, largest first
	// Seconds is the step's roofline time: every part priced at its peak,
	// one after another on one stream.
	Seconds         float64
	FLOPs, Bytes    float64
	Launches        int
	ModelFLOPs      float64 // what MFU counts as useful work in the step
	TensorFLOPs     float64 // the part of FLOPs that runs on tensor cores
	UnmodelledCalls int
}

// MFU is ModelFLOPs over the step's time at the GPU's bf16 tensor peak,
// the denominator MFU is reported against: an upper bound on what the
// step can reach with these kernels.
func (r Report) MFU() float64 {
	if r.Seconds <= 0 || r.GPU.BF16 <= 0 {
		return 0
	}
	return r.ModelFLOPs / r.Seconds / r.GPU.BF16
}

// Estimate prices a step's trace on g. modelFLOPs is the step's useful
// work for MFU (6·N + attention per token, times the tokens).
func Estimate(trace []meta.Call, g GPU, modelFLOPs float64) Report {
	r := Report{GPU: g, ModelFLOPs: modelFLOPs}
	byOp := map[string]*OpCost{}
	var order []string
	for _, c := range trace {
		parts, ok := Parts(c)
		oc := byOp[c.Op]
		if oc == nil {
			oc = &OpCost{Op: c.Op, Modelled: true, Host: true}
			byOp[c.Op] = oc
			order = append(order, c.Op)
		}
		oc.Calls++
		oc.Modelled = oc.Modelled && ok
		if !ok {
			r.UnmodelledCalls++
		}
		for _, p := range parts {
			t, mem := p.seconds(g)
			oc.Host = oc.Host && p.Unit == HostCPU
			if p.Unit == HostCPU {
				continue
			}
			oc.Launches += p.Calls
			oc.FLOPs += p.FLOPs
			oc.Bytes += p.Bytes
			oc.Seconds += t
			oc.MemoryBound += mem
			if p.Unit == TensorBF16 {
				r.TensorFLOPs += p.FLOPs
			}
		}
	}
	for _, op := range order {
		oc := byOp[op]
		r.Ops = append(r.Ops, *oc)
		r.Seconds += oc.Seconds
		r.FLOPs += oc.FLOPs
		r.Bytes += oc.Bytes
		r.Launches += oc.Launches
	}
	sort.SliceStable(r.Ops, func(i, j int) bool { return r.Ops[i].Seconds > r.Ops[j].Seconds })
	return r
}

// seconds is the part's roofline time on g, and that time again if memory
// bound (0 if arithmetic bound).
func (p Part) seconds(g GPU) (t, memoryBound float64) {
	var compute, memory float64
	if pk := g.peak(p.Unit); pk > 0 {
		compute = p.FLOPs / pk
	}
	if bw := g.bandwidth(p.Unit); bw > 0 {
		memory = p.Bytes / bw
	}
	if memory >= compute {
		return memory, memory
	}
	return compute, 0
}

// Write prints the report: a header naming the GPU and its peaks, a table
// of the top ops by time (all of them if top ≤ 0), and the step's totals.
// Every line starts with Label. what describes the step (model, shape,
// dtype).
func (r Report) Write(w io.Writer, what string, top int) error {
	var b strings.Builder
	line := func(format string, args ...any) {
		b.WriteString(Label + " | " + fmt.Sprintf(format, args...) + "\n")
	}
	g := r.GPU
	line("%s on %s: %.0f TFLOP/s bf16 tensor, %.1f TFLOP/s fp32, %.2f TB/s (%s)", what, g.Name, g.BF16/1e12, g.FP32/1e12,
		g.Memory/1e12, g.Source)
	line("%-26s %6s %8s %12s %10s %10s %6s  %s", "op", "calls", "launches", "GFLOP", "GB", "time ms", "share", "bound")
	n := len(r.Ops)
	if top > 0 && top < n {
		n = top
	}
	for _, o := range r.Ops[:n] {
		bound := "compute"
		switch {
		case o.Host:
			bound = "host CPU (not GPU time)"
		case o.Seconds == 0:
			bound = "-"
		case o.MemoryBound >= o.Seconds/2:
			bound = "memory"
		}
		if !o.Modelled {
			bound += " (no formula: priced as a streaming kernel)"
		}
		share := 0.0
		if r.Seconds > 0 {
			share = 100 * o.Seconds / r.Seconds
		}
		line("%-26s %6d %8d %12.1f %10.3f %10.3f %5.1f%%  %s", o.Op, o.Calls, o.Launches, o.FLOPs/1e9, o.Bytes/1e9,
			o.Seconds*1e3, share, bound)
	}
	if n < len(r.Ops) {
		var rest float64
		for _, o := range r.Ops[n:] {
			rest += o.Seconds
		}
		line("%d more ops: %.3f ms", len(r.Ops)-n, rest*1e3)
	}
	tensor := 0.0
	if r.FLOPs > 0 {
		tensor = 100 * r.TensorFLOPs / r.FLOPs
	}
	line("step %.3f ms at the peaks (a lower bound on step time) | %.3g TFLOP executed, %.0f%% on bf16 tensor cores | %.3g GB moved | %d launches",
		r.Seconds*1e3, r.FLOPs/1e12, tensor, r.Bytes/1e9, r.Launches)
	line("MFU at most %.1f%% (%.3g model TFLOP per step over %.0f TFLOP/s bf16)", 100*r.MFU(), r.ModelFLOPs/1e12, g.BF16/1e12)
	if r.UnmodelledCalls > 0 {
		line("%d calls of ops without a formula were priced as streaming kernels", r.UnmodelledCalls)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
