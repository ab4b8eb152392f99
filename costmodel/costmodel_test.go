package costmodel_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/attnplan"
	"github.com/gotrain/gotrain/backend/meta"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/costmodel"
	"github.com/gotrain/gotrain/metrics"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

// traced runs fn on a tracing accounting backend and returns its calls.
func traced(t *testing.T, fn func(be *meta.Backend, alloc func(backend.Pool, backend.DType, int) backend.Buffer)) []meta.Call {
	t.Helper()
	be := meta.New(meta.Options{Trace: true})
	fn(be, func(p backend.Pool, dt backend.DType, n int) backend.Buffer {
		b, err := be.Alloc(p, backend.Activations, dt, n)
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
	return be.Trace()
}

func onlyPart(t *testing.T, c meta.Call) costmodel.Part {
	t.Helper()
	parts, ok := costmodel.Parts(c)
	if !ok || len(parts) != 1 {
		t.Fatalf("%s: parts %+v (modelled %v), want one", c.Op, parts, ok)
	}
	return parts[0]
}

// A matmul without bias is one GEMM of 2·N·C·OC FLOPs that reads both
// operands and writes the output once: on the tensor cores with bf16
// operands, on the CUDA cores in fp32, and after a widening Cast of the
// 16-bit operand when the two differ (as backend/cuda does).
func TestMatmulIsOneGEMM(t *testing.T) {
	const N, C, OC = 64, 48, 80
	for _, tc := range []struct {
		x, w backend.DType
		unit costmodel.Unit
	}{{backend.BF16, backend.BF16, costmodel.TensorBF16}, {backend.F32, backend.F32, costmodel.CUDACores}} {
		calls := traced(t, func(be *meta.Backend, alloc func(backend.Pool, backend.DType, int) backend.Buffer) {
			be.MatmulForward(alloc(backend.Device, backend.F32, N*OC), alloc(backend.Device, tc.x, N*C),
				alloc(backend.Device, tc.w, OC*C), backend.Buffer{}, N, C, OC)
		})
		p := onlyPart(t, calls[0])
		wantBytes := float64(N*C*tc.x.Size() + OC*C*tc.w.Size() + N*OC*4)
		if p.Unit != tc.unit || p.FLOPs != 2*N*C*OC || p.Bytes != wantBytes || p.Calls != 1 {
			t.Errorf("%s·%s: %+v, want %s, %d FLOPs, %.0f bytes", tc.x, tc.w, p, tc.unit, 2*N*C*OC, wantBytes)
		}
	}
	calls := traced(t, func(be *meta.Backend, alloc func(backend.Pool, backend.DType, int) backend.Buffer) {
		be.MatmulForward(alloc(backend.Device, backend.F32, N*OC), alloc(backend.Device, backend.BF16, N*C),
			alloc(backend.Device, backend.F32, OC*C), backend.Buffer{}, N, C, OC)
	})
	parts, _ := costmodel.Parts(calls[0])
	if len(parts) != 2 || !strings.HasPrefix(parts[0].Name, "kernel cast inp") || parts[0].Bytes != float64(N*C*(2+4)) ||
		parts[1].Unit != costmodel.CUDACores {
		t.Errorf("bf16·fp32 matmul: %+v, want a cast of inp to fp32, then an fp32 GEMM", parts)
	}
}

// A part's time is the larger of its FLOPs over the unit's peak and its
// bytes over the bandwidth; a step's time is the sum; MFU is the model's
// FLOPs over that time at the bf16 peak.
func TestRooflineTime(t *testing.T) {
	h100, err := costmodel.LookupGPU("H100")
	if err != nil {
		t.Fatal(err)
	}
	const N, C, OC = 4096, 4096, 4096 // a GEMM well above the ridge point
	calls := traced(t, func(be *meta.Backend, alloc func(backend.Pool, backend.DType, int) backend.Buffer) {
		be.MatmulForward(alloc(backend.Device, backend.BF16, N*OC), alloc(backend.Device, backend.BF16, N*C),
			alloc(backend.Device, backend.BF16, OC*C), backend.Buffer{}, N, C, OC)
		be.Add(alloc(backend.Device, backend.BF16, N*C), alloc(backend.Device, backend.BF16, N*C), alloc(backend.Device, backend.BF16, N*C), N*C)
	})
	r := costmodel.Estimate(calls, h100, 1e12)
	gemm := 2.0 * N * C * OC / 989e12
	add := 3.0 * 2 * N * C / 3.35e12
	if len(r.Ops) != 2 || math.Abs(r.Seconds-(gemm+add)) > 1e-12 {
		t.Fatalf("step %.6g s, want %.6g + %.6g (ops %+v)", r.Seconds, gemm, add, r.Ops)
	}
	if r.Ops[0].Op != "MatmulForward" || r.Ops[0].MemoryBound != 0 || r.Ops[1].MemoryBound != r.Ops[1].Seconds {
		t.Errorf("the GEMM should be compute-bound and the add memory-bound: %+v", r.Ops)
	}
	if mfu := r.MFU(); math.Abs(mfu-1e12/(gemm+add)/989e12) > 1e-12 {
		t.Errorf("MFU %.6g", mfu)
	}
	if _, err := costmodel.LookupGPU("v100"); err == nil || !strings.Contains(err.Error(), "h100, h200, a100, l40") {
		t.Errorf("unknown GPU: %v", err)
	}
}

// stepTrace runs two trainer steps of cfg on the accounting backend and
// returns the second step's calls.
func stepTrace(t *testing.T, cfg model.Config, B, T int, dt backend.DType) []meta.Call {
	t.Helper()
	js := fmt.Sprintf(`{"train_micro_batch_size_per_gpu": %d, "gradient_accumulation_steps": 1,
		"optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}, "bf16": {"enabled": %t}}`, B, dt == backend.BF16)
	dsc, err := config.Parse("(test)", []byte(js), config.Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := dsc.Resolve(1)
	if err != nil {
		t.Fatal(err)
	}
	be := meta.New(meta.Options{Trace: true})
	obs := &secondStep{be: be}
	_, err = trainer.Run(context.Background(), be, trainer.Options{Config: dsc, Batch: batch, Model: cfg, SeqLen: T,
		MaxSteps: 2, Batches: zeros(B*T + 1), Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	if obs.trace == nil {
		t.Fatal("no second step")
	}
	return obs.trace
}

type secondStep struct {
	be    *meta.Backend
	trace []meta.Call
}

func (s *secondStep) ObserveStep(rec metrics.StepRecord, _ backend.MemoryStats, _ metrics.CommCounters) {
	switch rec.Step {
	case 1:
		s.be.ResetTrace()
	case 2:
		s.trace = s.be.Trace()
	}
}

type zeros int

func (z zeros) Next(inputs, targets []int32) error {
	clear(inputs)
	clear(targets)
	return nil
}

// The GEMMs of a real GPT-2 step add up to the published count of a
// training step's matmul work, 6 FLOPs per weight per token (forward 2,
// backward 4: Kaplan et al. 2020; nanoGPT's estimate_mfu) over the weight
// matrices and the tied head (12·C² per block, Vp·C), independently of how
// the model splits its matmuls. Every op of the step has a formula, and
// every line printed carries the cost model's label.
func TestGPT2StepMatchesSixFLOPsPerWeight(t *testing.T) {
	cfg, ok := model.Preset("gpt2-tiny")
	if !ok {
		t.Fatal("no gpt2-tiny preset")
	}
	const B, T = 2, 64
	calls := stepTrace(t, cfg, B, T, backend.BF16)
	var gemm float64
	for _, c := range calls {
		parts, ok := costmodel.Parts(c)
		if !ok {
			t.Errorf("op %s has no formula", c.Op)
		}
		if c.Op != "MatmulForward" && c.Op != "MatmulBackward" {
			continue
		}
		for _, p := range parts {
			if strings.HasPrefix(p.Name, "GEMM") {
				gemm += p.FLOPs
			}
		}
	}
	weights := float64(cfg.L*12*cfg.C*cfg.C + cfg.Vp*cfg.C)
	if want := 6 * weights * B * T; gemm != want {
		t.Errorf("GEMM FLOPs of the step %.6g, want 6·%.0f weights·%d tokens = %.6g", gemm, weights, B*T, want)
	}

	g, _ := costmodel.LookupGPU("a100")
	r := costmodel.Estimate(calls, g, cfg.FlopsPerToken(T)*B*T)
	var out bytes.Buffer
	if err := r.Write(&out, "gpt2-tiny", 5); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	for _, l := range lines {
		if !strings.HasPrefix(l, costmodel.Label+" | ") {
			t.Errorf("line without the cost model label: %q", l)
		}
	}
	if len(lines) < 5+4 || r.UnmodelledCalls != 0 || r.MFU() <= 0 || r.MFU() >= 1 {
		t.Errorf("report: %d lines, %d unmodelled calls, MFU %.3g\n%s", len(lines), r.UnmodelledCalls, r.MFU(), out.String())
	}
	t.Logf("\n%s", out.String())
}

// An op the model has no formula for is still priced (its arguments read
// or written once) and flagged; an op on host-pool buffers (the offloaded
// optimizer) takes no GPU time.
func TestUnknownAndHostOps(t *testing.T) {
	g, _ := costmodel.LookupGPU("l40")
	unknown := meta.Call{Op: "FancyNewOp", Args: []meta.Arg{{Name: "x", DType: backend.BF16, Len: 1000, Pool: backend.Device},
		{Name: "y", DType: backend.F32, Len: 1000, Pool: backend.Device, Write: true}}}
	r := costmodel.Estimate([]meta.Call{unknown}, g, 0)
	if r.UnmodelledCalls != 1 || r.Bytes != 6000 || r.Ops[0].Modelled {
		t.Errorf("unknown op: %+v", r)
	}
	calls := traced(t, func(be *meta.Backend, alloc func(backend.Pool, backend.DType, int) backend.Buffer) {
		const n = 1 << 20
		be.AdamW(alloc(backend.HostPinned, backend.F32, n), backend.Buffer{}, alloc(backend.HostPinned, backend.F32, n),
			alloc(backend.HostPinned, backend.F32, n), alloc(backend.HostPinned, backend.F32, n),
			backend.AdamWParams{LR: 1, Step: 1})
	})
	r = costmodel.Estimate(calls, g, 0)
	if r.Seconds != 0 || !r.Ops[0].Host {
		t.Errorf("offloaded AdamW: %+v", r.Ops)
	}
}

// Attention's GEMMs skip the keys after each chunk's last query row: with
// T = 1024 in eight chunks of 128 rows they multiply Σ_c 128·128(c+1) =
// 128²·36 (query, key) pairs, (n+1)/2n = 9/16 of the full T² product,
// forward (two products) and backward (five). Each product is one GEMM
// call per batch row (B = 2 ≤ KV = 4: a strided batch over the key/value
// heads).
func TestAttentionCausalChunks(t *testing.T) {
	const B, T, NH, KV, HD = 2, 1024, 8, 4, 64
	calls := traced(t, func(be *meta.Backend, alloc func(backend.Pool, backend.DType, int) backend.Buffer) {
		qkv, out := alloc(backend.Device, backend.BF16, B*T*(NH+2*KV)*HD), alloc(backend.Device, backend.BF16, B*T*NH*HD)
		lse := alloc(backend.Device, backend.F32, B*NH*T)
		be.AttentionForward(out, lse, qkv, B, T, NH, KV, HD)
		be.AttentionBackward(alloc(backend.Device, backend.BF16, B*T*(NH+2*KV)*HD), alloc(backend.Device, backend.BF16, B*T*NH*HD),
			out, qkv, lse, B, T, NH, KV, HD)
	})
	if rows := attnplan.ChunkRows(B, T, NH, HD, 2*4*B*KV*T*HD, attnplan.Budget); rows != 128 {
		t.Fatalf("%d rows a chunk, want 128", rows)
	}
	full := 2.0 * B * NH * T * T * HD // one product over every (query, key) pair
	for i, c := range calls {
		var gemm float64
		gemms := 0
		for _, p := range mustParts(t, c) {
			if strings.HasPrefix(p.Name, "GEMM") {
				if p.Unit != costmodel.TensorBF16 {
					t.Errorf("%s: %s on %s", c.Op, p.Name, p.Unit)
				}
				gemm += p.FLOPs
				gemms += p.Calls
			}
		}
		products := []float64{2, 5}[i]
		if want := products * full * 9 / 16; gemm != want {
			t.Errorf("%s: GEMM FLOPs %.6g, want %.0f products × 9/16 of %.6g", c.Op, gemm, products, full)
		}
		if want := int(products) * 8 * B; gemms != want {
			t.Errorf("%s: %d GEMM calls, want %d", c.Op, gemms, want)
		}
	}
}

func mustParts(t *testing.T, c meta.Call) []costmodel.Part {
	t.Helper()
	parts, ok := costmodel.Parts(c)
	if !ok {
		t.Fatalf("%s has no formula", c.Op)
	}
	return parts
}

// FuzzParts: whatever dimensions and argument dtypes a traced call of a
// known op carries, its parts have finite, non-negative FLOPs, bytes and
// times, and pricing it does not panic.
func FuzzParts(f *testing.F) {
	f.Add(uint8(0), uint16(8), uint16(64), uint16(4), uint16(2), uint16(16), uint8(2), uint8(1))
	f.Add(uint8(3), uint16(1), uint16(300), uint16(2), uint16(1), uint16(128), uint8(1), uint8(2))
	ops := []string{"AttentionForward", "AttentionBackward", "MatmulForward", "MatmulBackward", "CrossEntropyForward",
		"EncoderBackward", "LayerNormBackward", "Copy", "AdamW", "SwiGLUBackward"}
	dts := []backend.DType{backend.F32, backend.BF16, backend.F16}
	f.Fuzz(func(t *testing.T, op uint8, b, tt, nh, kv, hd uint16, dt1, dt2 uint8) {
		B, T, NH, KV, HD := int(b%64), int(tt%8192), int(nh%64)+1, int(kv%64)+1, int(hd%512)+1
		d1, d2 := dts[int(dt1)%len(dts)], dts[int(dt2)%len(dts)]
		c := meta.Call{Op: ops[int(op)%len(ops)], Dims: []meta.Dim{{Name: "B", Value: B}, {Name: "T", Value: T},
			{Name: "NH", Value: NH}, {Name: "KV", Value: KV}, {Name: "HD", Value: HD}, {Name: "N", Value: B * T},
			{Name: "C", Value: HD}, {Name: "OC", Value: NH * HD}, {Name: "V", Value: HD}, {Name: "Vp", Value: HD}}}
		for i, name := range []string{"qkv", "out", "dout", "dqkv", "lse", "inp", "weight", "dweight", "dinp", "logits",
			"probs", "dst", "src", "param", "grad", "x"} {
			dt := d1
			if i%2 == 1 {
				dt = d2
			}
			c.Args = append(c.Args, meta.Arg{Name: name, DType: dt, Len: B * T * (NH + 2*KV) * HD, Pool: backend.Device})
		}
		parts, _ := costmodel.Parts(c)
		for _, p := range parts {
			if !(p.FLOPs >= 0 && p.Bytes >= 0 && !math.IsInf(p.FLOPs+p.Bytes, 0)) || p.Calls < 0 {
				t.Fatalf("%s: part %+v", c.Op, p)
			}
		}
		g, _ := costmodel.LookupGPU("h100")
		if r := costmodel.Estimate([]meta.Call{c}, g, 1); !(r.Seconds >= 0) || math.IsInf(r.Seconds, 0) {
			t.Fatalf("%s: %g s", c.Op, r.Seconds)
		}
	})
}

// The Llama family's ops (a Qwen3-0.6B layer's shapes: C 1024, 16 query
// and 8 key/value heads of 128, SwiGLU 3072, B 4 × T 4096) all have
// formulas, so a trace of that family's step is priced op by op as soon
// as the model traces one; grouped attention runs on the tensor cores.
func TestDecoderOpsArePriced(t *testing.T) {
	const B, T, C, NH, KV, HD, I = 4, 4096, 1024, 16, 8, 128, 3072
	const N, W = B * T, (NH + 2*KV) * HD
	calls := traced(t, func(be *meta.Backend, alloc func(backend.Pool, backend.DType, int) backend.Buffer) {
		bf := func(n int) backend.Buffer { return alloc(backend.Device, backend.BF16, n) }
		f32 := func(n int) backend.Buffer { return alloc(backend.Device, backend.F32, n) }
		x, h, rstd, w := bf(N*C), bf(N*C), f32(N), bf(C)
		be.RMSNormForward(h, rstd, x, w, N, C, 1e-6)
		qkv, wqkv := bf(N*W), bf(W*C)
		be.MatmulForward(qkv, h, wqkv, backend.Buffer{}, N, C, W)
		rot, rrstd, qn, kn, cos, sin := bf(N*W), f32(N*(NH+KV)), bf(HD), bf(HD), f32(T*HD/2), f32(T*HD/2)
		be.QKVRotaryForward(rot, rrstd, qkv, qn, kn, cos, sin, B, T, NH, KV, HD, 1e-6)
		att, lse := bf(N*NH*HD), f32(B*NH*T)
		be.AttentionForward(att, lse, rot, B, T, NH, KV, HD)
		be.AttentionBackward(bf(N*W), bf(N*NH*HD), att, rot, lse, B, T, NH, KV, HD)
		up, act := bf(N*2*I), bf(N*I)
		be.SwiGLUForward(act, up, N, I)
		be.SwiGLUBackward(bf(N*2*I), bf(N*I), up, N, I)
		be.RMSNormBackward(bf(N*C), f32(C), bf(N*C), x, w, rstd, N, C)
		be.ResidualRMSNormForward(bf(N*C), bf(N*C), f32(N), x, h, w, N, C, 1e-6)
	})
	g, _ := costmodel.LookupGPU("h100")
	r := costmodel.Estimate(calls, g, 0)
	if r.UnmodelledCalls != 0 || len(r.Ops) != len(calls) {
		t.Errorf("%d calls without a formula; ops %+v", r.UnmodelledCalls, r.Ops)
	}
	for _, c := range calls {
		for _, p := range mustParts(t, c) {
			if strings.HasPrefix(p.Name, "GEMM") && p.Unit != costmodel.TensorBF16 {
				t.Errorf("%s: %s on %s", c.Op, p.Name, p.Unit)
			}
		}
	}
}

// DeviceGPU finds the dense bf16 peak MFU is reported against from the
// driver's device name, the most specific entry winning (an H100 PCIe is
// not an SXM part, an A10G not an A10); GPUs and --gpu keep to the four the
// cost model prices.
func TestDeviceGPU(t *testing.T) {
	for _, c := range []struct {
		name string
		bf16 float64 // 0: unknown
	}{
		{"NVIDIA H200", 989e12}, {"NVIDIA H100 PCIe", 756e12}, {"NVIDIA H100 80GB HBM3", 989e12},
		{"NVIDIA H800", 989e12}, {"NVIDIA GH200 480GB", 989e12}, {"NVIDIA A100-SXM4-80GB", 312e12},
		{"NVIDIA A800 80GB PCIe", 312e12}, {"NVIDIA A10G", 70e12}, {"NVIDIA A10", 125e12},
		{"NVIDIA L40S", 362e12}, {"NVIDIA L40", 181e12}, {"NVIDIA L4", 121e12},
		{"NVIDIA GeForce RTX 4090", 165e12}, {"NVIDIA GeForce RTX 3090", 71e12}, {"NVIDIA RTX A6000", 155e12},
		{"Tesla V100-SXM2-16GB", 0}, {"", 0},
	} {
		g, ok := costmodel.DeviceGPU(c.name)
		if ok != (c.bf16 > 0) || g.BF16 != c.bf16 {
			t.Errorf("%q: %+v %v, want bf16 peak %g", c.name, g, ok, c.bf16)
		}
	}
	var keys []string
	for _, g := range costmodel.GPUs() {
		keys = append(keys, g.Key)
		if g.BF16 <= 0 || g.FP32 <= 0 || g.Memory <= 0 || g.PCIe <= 0 {
			t.Errorf("%s: the cost model needs every peak: %+v", g.Key, g)
		}
	}
	if got := strings.Join(keys, ","); got != "h100,h200,a100,l40" {
		t.Errorf("priced GPUs %s, want h100,h200,a100,l40", got)
	}
}
