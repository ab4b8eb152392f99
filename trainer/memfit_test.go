package trainer

import (
	"fmt"
	"testing"
)

// TestCheckMemoryRemedies: a run on 2 GPUs given 1 byte less device memory
// than its predicted peak does not fit, by exactly that byte, and gets the
// remedies in order; each remedy's peak equals the estimate of a config
// file written with that change by hand (an independent path: the parser,
// not CheckMemory's edits of the parsed struct); activation checkpointing,
// the offloads, the smaller micro batch and the shorter sequence each lower
// the device peak.
// Given its peak, the same run fits and gets no remedies.
func TestCheckMemoryRemedies(t *testing.T) {
	const world = 2
	base := func(stage int, extra string) string {
		return fmt.Sprintf(`{"train_micro_batch_size_per_gpu": %d, "gradient_accumulation_steps": 2, "bf16": {"enabled": true},
			"zero_optimization": {"stage": %d%s}}`, estMicro, stage, extra)
	}
	cfg := parseEst(t, base(1, ""), world)
	m := estModel()
	est, err := Estimate(cfg, m, world, estSeq, EstimateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	peak := est.Peak.Total()
	free := FreeMemory{GPU: true, Device: peak.Device - 1, Host: 1 << 50, HostRanks: world}
	mc, err := CheckMemory(cfg, m, world, estSeq, EstimateOptions{}, free)
	if err != nil {
		t.Fatal(err)
	}
	if d, h := mc.Need.Short(); d != 1 || h != 0 {
		t.Fatalf("short %d device, %d host bytes; want 1 and 0", d, h)
	}
	type want struct {
		name   string
		json   string
		seq    int
		ckpt   bool
		lowers bool // the device peak must go down
	}
	wants := []want{
		{"activation checkpointing", base(1, ""), estSeq, true, true},
		// Not lower here: on 2 ranks the gathered windows and overlap
		// buffers of this small model outweigh the halved states.
		{"ZeRO-3", base(3, ""), estSeq, false, false},
		{"optimizer offload", base(1, `, "offload_optimizer": {"device": "cpu", "pin_memory": true}`), estSeq, false, true},
		{"parameter offload", base(3, `, "offload_optimizer": {"device": "cpu", "pin_memory": true}, "offload_param": {"device": "cpu", "pin_memory": true}`), estSeq, false, true},
		{"half the micro batch, twice the accumulation", `{"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4, "bf16": {"enabled": true},
			"zero_optimization": {"stage": 1}}`, estSeq, false, true},
		{"a shorter sequence", base(1, ""), estSeq / 2, false, true},
	}
	if len(mc.Fixes) != len(wants) {
		t.Fatalf("%d remedies, want %d: %+v", len(mc.Fixes), len(wants), mc.Fixes)
	}
	for i, w := range wants {
		f := mc.Fixes[i]
		if f.Name != w.name || f.Err != nil {
			t.Errorf("remedy %d: %q (%v), want %q", i+1, f.Name, f.Err, w.name)
			continue
		}
		e, err := Estimate(parseEst(t, w.json, world), m, world, w.seq, EstimateOptions{Checkpoint: w.ckpt})
		if err != nil {
			t.Fatal(err)
		}
		if f.Peak != e.Peak.Total() {
			t.Errorf("%s: peak %+v, the hand-written config's %+v", w.name, f.Peak, e.Peak.Total())
		}
		if w.lowers && f.Peak.Device >= peak.Device {
			t.Errorf("%s: device peak %d, not below %d", w.name, f.Peak.Device, peak.Device)
		}
		if f.Need.Device != f.Peak.Device || f.Need.FreeDevice != free.Device {
			t.Errorf("%s: need %+v", w.name, f.Need)
		}
	}
	free.Device = peak.Device
	if mc, err = CheckMemory(cfg, m, world, estSeq, EstimateOptions{}, free); err != nil || !mc.Need.Fits() || len(mc.Fixes) != 0 {
		t.Errorf("the peak itself: fits %v, %d remedies, %v", mc.Need.Fits(), len(mc.Fixes), err)
	}
}

// TestCheckMemoryCPU: on a CPU run the backend's device pool is host
// memory, so both pools of every rank on the machine count against
// MemAvailable; remedies already in use are not offered.
func TestCheckMemoryCPU(t *testing.T) {
	cfg := parseEst(t, `{"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
		"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}}}`, 2)
	m := estModel()
	est, err := Estimate(cfg, m, 2, estSeq, EstimateOptions{Checkpoint: true})
	if err != nil {
		t.Fatal(err)
	}
	p := est.Peak.Total()
	need := 2 * (p.Device + p.Host)
	mc, err := CheckMemory(cfg, m, 2, estSeq, EstimateOptions{Checkpoint: true}, FreeMemory{Host: need - 10, HostRanks: 2})
	if err != nil {
		t.Fatal(err)
	}
	if d, h := mc.Need.Short(); d != 0 || h != 10 {
		t.Errorf("short %d device, %d host; want 0 and 10", d, h)
	}
	if len(mc.Fixes) != 1 || mc.Fixes[0].Name != "a shorter sequence" {
		t.Errorf("remedies %+v; want only the shorter sequence (the rest are on, the micro batch is 1)", mc.Fixes)
	}
}
