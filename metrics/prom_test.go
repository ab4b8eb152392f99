package metrics

import (
	"math"
	"sort"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/gotrain/gotrain/backend"
)

// gathered is one gathered sample: its labels and value (counter, gauge or
// histogram sample count).
type gathered struct {
	labels map[string]string
	value  float64
}

func gather(t *testing.T, p *Prometheus) map[string][]gathered {
	t.Helper()
	fams, err := p.Registry().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string][]gathered{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			g := gathered{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				g.labels[l.GetName()] = l.GetValue()
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				g.value = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				g.value = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				g.value = float64(m.GetHistogram().GetSampleCount())
			}
			out[f.GetName()] = append(out[f.GetName()], g)
		}
	}
	return out
}

// value returns the one sample of name whose labels include want.
func value(t *testing.T, got map[string][]gathered, name string, want map[string]string) float64 {
	t.Helper()
	var found []float64
	for _, g := range got[name] {
		ok := true
		for k, v := range want {
			if g.labels[k] != v {
				ok = false
			}
		}
		if ok {
			found = append(found, g.value)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s%v: %d samples, want 1", name, want, len(found))
	}
	return found[0]
}

func TestPrometheusExportsEveryMetricWithRank(t *testing.T) {
	gpus := []GPUInfo{{Index: 0, MemoryUsedBytes: 3 << 30, Utilization: 0.5}, {Index: 1, MemoryUsedBytes: 1 << 20, Utilization: -1}}
	p, err := NewPrometheus(3, PromOptions{GPUs: func() ([]GPUInfo, error) { return gpus, nil }})
	if err != nil {
		t.Fatal(err)
	}
	var mem backend.MemoryStats
	mem.Current[backend.Device][backend.Params] = 497_903_616
	mem.Current[backend.Host][backend.Optimizer] = 1 << 30
	mem.Peak[backend.Device] = 600_000_000
	rec := StepRecord{Step: 7, Loss: 3.25, LR: 6e-4, GradNorm: 1.5, TokensPerSecond: 12345, LossScale: 65536,
		MFU: 0.41, Tokens: 7 * 4096, StepSeconds: 0.3, SkippedSteps: 2}
	p.ObserveStep(rec, mem, CommCounters{"all_reduce": {Bytes: 1 << 20, Seconds: 0.25}, "barrier": {Seconds: 0.01}})
	p.ObserveCheckpoint(4.5)

	got := gather(t, p)
	names := []string{"gotrain_step", "gotrain_tokens_total", "gotrain_tokens_per_second", "gotrain_step_duration_seconds",
		"gotrain_loss", "gotrain_learning_rate", "gotrain_grad_norm", "gotrain_loss_scale", "gotrain_skipped_steps_total",
		"gotrain_model_flops_utilization_ratio", "gotrain_memory_bytes", "gotrain_memory_peak_bytes",
		"gotrain_comm_bytes_total", "gotrain_comm_seconds_total", "gotrain_checkpoint_seconds",
		"gotrain_gpu_memory_used_bytes", "gotrain_gpu_utilization_ratio"}
	for _, n := range names {
		if len(got[n]) == 0 {
			t.Errorf("%s missing", n)
		}
		for _, g := range got[n] {
			if g.labels["rank"] != "3" {
				t.Errorf("%s%v: rank label %q, want \"3\"", n, g.labels, g.labels["rank"])
			}
		}
	}
	for _, n := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if len(got[n]) == 0 {
			t.Errorf("Go/process collector metric %s missing", n)
		}
	}

	r := map[string]string{}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"gotrain_step", r, 7},
		{"gotrain_tokens_total", r, 28672},
		{"gotrain_tokens_per_second", r, 12345},
		{"gotrain_step_duration_seconds", r, 1}, // one observation
		{"gotrain_loss", r, 3.25},
		{"gotrain_learning_rate", r, 6e-4},
		{"gotrain_grad_norm", r, 1.5},
		{"gotrain_loss_scale", r, 65536},
		{"gotrain_skipped_steps_total", r, 2},
		{"gotrain_model_flops_utilization_ratio", r, 0.41},
		{"gotrain_memory_bytes", map[string]string{"pool": "device", "category": "params"}, 497_903_616},
		{"gotrain_memory_bytes", map[string]string{"pool": "host", "category": "optimizer"}, 1 << 30},
		{"gotrain_memory_bytes", map[string]string{"pool": "device", "category": "grads"}, 0},
		{"gotrain_memory_peak_bytes", map[string]string{"pool": "device"}, 600_000_000},
		{"gotrain_comm_bytes_total", map[string]string{"op": "all_reduce"}, 1 << 20},
		{"gotrain_comm_seconds_total", map[string]string{"op": "all_reduce"}, 0.25},
		{"gotrain_comm_seconds_total", map[string]string{"op": "barrier"}, 0.01},
		{"gotrain_comm_bytes_total", map[string]string{"op": "all_gather"}, 0},
		{"gotrain_checkpoint_seconds", r, 4.5},
		{"gotrain_gpu_memory_used_bytes", map[string]string{"gpu": "1"}, 1 << 20},
		{"gotrain_gpu_utilization_ratio", map[string]string{"gpu": "0"}, 0.5},
	}
	for _, c := range checks {
		if v := value(t, got, c.name, c.labels); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	// 3 pools × 7 categories, every comm op from the start, and no
	// utilization series for the GPU that does not report it.
	if n := len(got["gotrain_memory_bytes"]); n != 21 {
		t.Errorf("%d gotrain_memory_bytes series, want 21", n)
	}
	var ops []string
	for _, g := range got["gotrain_comm_bytes_total"] {
		ops = append(ops, g.labels["op"])
	}
	sort.Strings(ops)
	want := []string{"all_gather", "all_reduce", "barrier", "broadcast", "reduce_scatter"}
	if len(ops) != len(want) {
		t.Errorf("comm ops %v, want %v", ops, want)
	} else {
		for i := range want {
			if ops[i] != want[i] {
				t.Errorf("comm ops %v, want %v", ops, want)
				break
			}
		}
	}
	if n := len(got["gotrain_gpu_utilization_ratio"]); n != 1 {
		t.Errorf("%d utilization series, want 1 (GPU 1 reports none)", n)
	}
}

// Counters follow the trainer's cumulative values, ignore a value that went
// down (it becomes the new baseline) and never decrease.
func TestPrometheusCountersMonotonic(t *testing.T) {
	p, err := NewPrometheus(0, PromOptions{})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		tokens, skipped, arBytes int64
		arSec                    float64
		// expected counters, worked out by hand from the rule above
		wantTokens, wantSkipped, wantBytes, wantSec float64
	}{
		{100, 0, 10, 0.5, 100, 0, 10, 0.5},
		{250, 1, 30, 1.5, 250, 1, 30, 1.5},
		{250, 1, 30, 1.5, 250, 1, 30, 1.5},
		{50, 0, 5, 0.25, 250, 1, 30, 1.5}, // the caller restarted its counts
		{120, 2, 25, 1.25, 320, 3, 50, 2.5},
		{120, 2, 25, math.NaN(), 320, 3, 50, 2.5}, // a NaN adds nothing
		{400, 2, 25, 2.25, 600, 3, 50, 3.5},
	}
	prev := map[string]float64{}
	for i, s := range steps {
		p.ObserveStep(StepRecord{Step: i + 1, Tokens: s.tokens, SkippedSteps: int(s.skipped)}, backend.MemoryStats{},
			CommCounters{"all_reduce": {Bytes: s.arBytes, Seconds: s.arSec}})
		got := gather(t, p)
		ar := map[string]string{"op": "all_reduce"}
		now := map[string]float64{
			"tokens":  value(t, got, "gotrain_tokens_total", nil),
			"skipped": value(t, got, "gotrain_skipped_steps_total", nil),
			"bytes":   value(t, got, "gotrain_comm_bytes_total", ar),
			"seconds": value(t, got, "gotrain_comm_seconds_total", ar),
		}
		want := map[string]float64{"tokens": s.wantTokens, "skipped": s.wantSkipped, "bytes": s.wantBytes, "seconds": s.wantSec}
		for k, v := range now {
			if v != want[k] {
				t.Errorf("step %d: %s counter %v, want %v", i+1, k, v, want[k])
			}
			if v < prev[k] {
				t.Errorf("step %d: %s counter went down from %v to %v", i+1, k, prev[k], v)
			}
			prev[k] = v
		}
	}
}

// Each Prometheus has its own registry: two ranks in one process do not
// collide, and nothing lands on the process-global registry.
func TestPrometheusRegistriesIndependent(t *testing.T) {
	a, err := NewPrometheus(0, PromOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewPrometheus(1, PromOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.ObserveStep(StepRecord{Step: 5, Tokens: 10}, backend.MemoryStats{}, nil)
	if v := value(t, gather(t, b), "gotrain_step", nil); v != 0 {
		t.Errorf("rank 1 step = %v after observing rank 0, want 0", v)
	}
}

func TestMFU(t *testing.T) {
	// GPT-2 d12 at T=1024: 8.035e8 FLOP/token (llm.c); 100k tok/s per rank
	// on an A100's 312 TFLOP/s bf16 peak is 8.035e13/3.12e14.
	if got, want := MFU(1e5, 8.035e8, 312e12), 0.2575320512820513; math.Abs(got-want) > 1e-12 {
		t.Errorf("MFU = %v, want %v", got, want)
	}
	if got := MFU(1e5, 8.035e8, 0); got != 0 {
		t.Errorf("MFU with unknown peak = %v, want 0", got)
	}
	// A roofline measured under load can be below what the step reaches:
	// never more than the whole.
	if got := MFU(1e5, 8.035e8, 4e13); got != 1 {
		t.Errorf("MFU above the peak = %v, want 1", got)
	}
}

func TestBreakdownLine(t *testing.T) {
	var b Breakdown
	if got, want := b.Line(), "time (ms) | fwd: 0.00 | bwd: 0.00 | bwd_allreduce: 0.00 | step: 0.00"; got != want {
		t.Errorf("empty Line() = %q, want %q", got, want)
	}
	b.Add(0.010, 0.030, 0.005, 0.002)
	b.Add(0.014, 0.034, 0.007, 0.004)
	// Means per step: fwd 12 ms, bwd 32 ms, allreduce 6 ms, step 3 ms.
	if got, want := b.Line(), "time (ms) | fwd: 12.00 | bwd: 32.00 | bwd_allreduce: 6.00 | step: 3.00"; got != want {
		t.Errorf("Line() = %q, want %q", got, want)
	}
	if b.Steps() != 2 {
		t.Errorf("Steps() = %d, want 2", b.Steps())
	}
	b.Reset()
	b.Add(0.0012345, 0, 0, 0)
	if got, want := b.Line(), "time (ms) | fwd: 1.23 | bwd: 0.00 | bwd_allreduce: 0.00 | step: 0.00"; got != want {
		t.Errorf("after Reset Line() = %q, want %q", got, want)
	}
}
