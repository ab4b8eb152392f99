package metrics

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/gotrain/gotrain/backend"
)

// CommOp is one collective kind's cumulative traffic since the run started:
// payload bytes and wall-clock seconds, as comm.OpStats counts them.
type CommOp struct {
	Bytes   int64
	Seconds float64
}

// CommCounters maps an op label ("all_reduce", "reduce_scatter",
// "all_gather", "broadcast", "barrier"; see CommOpLabels) to its cumulative
// counters. The trainer fills it from comm.Stats with Kind.Label() as key;
// metrics does not import comm so that comm stays free to import metrics.
type CommCounters map[string]CommOp

// CommOpLabels lists the op label values every registry exports from the
// start, so a dashboard sees a zero series before the first collective.
func CommOpLabels() []string {
	return []string{"all_reduce", "reduce_scatter", "all_gather", "broadcast", "barrier"}
}

// PromOptions configures NewPrometheus. The zero value is usable.
type PromOptions struct {
	// StepBuckets are the upper bounds, in seconds, of the
	// gotrain_step_duration_seconds histogram; nil means 10 ms doubling up
	// to about 82 s, which spans a tiny CPU model to a large GPU step.
	StepBuckets []float64
	// GPUs, when set, is called on every scrape to export
	// gotrain_gpu_memory_used_bytes{gpu} and gotrain_gpu_utilization_ratio{gpu}
	// (e.g. the GPUs of QueryDefaultNVML). A failing call exports no GPU
	// series for that scrape rather than failing the scrape. It must be safe
	// to call from the HTTP server's goroutines.
	GPUs func() ([]GPUInfo, error)
	// ScrapeInterval is how long Serve's /metrics serves a rendered page
	// again before gathering anew (0: DefaultScrapeInterval), and
	// MaxConcurrentScrapes how many scrapes it serves at once, answering
	// the rest 503 (0: DefaultMaxConcurrentScrapes); see prom_cache.go.
	ScrapeInterval       time.Duration
	MaxConcurrentScrapes int
}

// Prometheus holds one rank's metrics on its own registry (never the
// process-global one), with the Go and process collectors. Every gotrain_*
// series carries a constant rank label. ObserveStep and ObserveCheckpoint may
// be called from any goroutine; scrapes run concurrently with them.
//
// Counters (gotrain_tokens_total, gotrain_skipped_steps_total,
// gotrain_comm_*_total) are fed cumulative values by the trainer and Add the
// increase since the previous call. A cumulative value that goes down (a
// caller restarting its count) adds nothing and becomes the new baseline, so
// the exported counters never decrease.
type Prometheus struct {
	reg *prometheus.Registry

	step         prometheus.Gauge
	tokens       prometheus.Counter
	tokensPerSec prometheus.Gauge
	stepDuration prometheus.Histogram
	loss         prometheus.Gauge
	lr           prometheus.Gauge
	gradNorm     prometheus.Gauge
	lossScale    prometheus.Gauge
	skipped      prometheus.Counter
	mfu          prometheus.Gauge
	memory       *prometheus.GaugeVec
	memoryPeak   *prometheus.GaugeVec
	commBytes    *prometheus.CounterVec
	commSeconds  *prometheus.CounterVec
	checkpoint   prometheus.Gauge

	mu   sync.Mutex // guards last
	last cumulative

	scrapeInterval time.Duration
	maxScrapes     int
}

// cumulative is what the trainer's running totals were at the previous
// ObserveStep, so counters can Add the difference.
type cumulative struct {
	tokens       int64
	skipped      int64
	commBytes    map[string]int64
	commSeconds  map[string]float64
	haveCommBase bool
}

// NewPrometheus builds rank's metrics on a fresh registry.
func NewPrometheus(rank int, opts PromOptions) (*Prometheus, error) {
	reg := prometheus.NewRegistry()
	rl := prometheus.Labels{"rank": strconv.Itoa(rank)}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: rl})
	}
	buckets := opts.StepBuckets
	if buckets == nil {
		buckets = prometheus.ExponentialBuckets(0.01, 2, 14)
	}
	p := &Prometheus{
		reg:          reg,
		step:         gauge("gotrain_step", "Last completed optimizer step."),
		tokens:       prometheus.NewCounter(prometheus.CounterOpts{Name: "gotrain_tokens_total", Help: "Tokens trained on, over all ranks, since the run started.", ConstLabels: rl}),
		tokensPerSec: gauge("gotrain_tokens_per_second", "Tokens per second of the last step, over all ranks."),
		stepDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gotrain_step_duration_seconds", Help: "Wall-clock duration of optimizer steps.", ConstLabels: rl, Buckets: buckets}),
		loss:         gauge("gotrain_loss", "Global-batch mean training loss of the last step."),
		lr:           gauge("gotrain_learning_rate", "Learning rate the last step used."),
		gradNorm:     gauge("gotrain_grad_norm", "Global gradient norm of the last step, before clipping."),
		lossScale:    gauge("gotrain_loss_scale", "fp16 loss scale of the last step (1 without fp16)."),
		skipped:      prometheus.NewCounter(prometheus.CounterOpts{Name: "gotrain_skipped_steps_total", Help: "Optimizer steps skipped on fp16 overflow.", ConstLabels: rl}),
		mfu:          gauge("gotrain_model_flops_utilization_ratio", "Model FLOPs utilization of the last step (0..1); 0 when the peak FLOP/s is unknown."),
		memory: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gotrain_memory_bytes", Help: "Memory this rank's backend holds, by pool and category.", ConstLabels: rl},
			[]string{"pool", "category"}),
		memoryPeak: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gotrain_memory_peak_bytes", Help: "Peak total of each memory pool.", ConstLabels: rl},
			[]string{"pool"}),
		commBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gotrain_comm_bytes_total", Help: "Collective payload bytes, by op.", ConstLabels: rl},
			[]string{"op"}),
		commSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gotrain_comm_seconds_total", Help: "Wall-clock seconds spent in collectives, by op.", ConstLabels: rl},
			[]string{"op"}),
		checkpoint: gauge("gotrain_checkpoint_seconds", "Wall-clock duration of the last checkpoint save."),
		last:       cumulative{commBytes: map[string]int64{}, commSeconds: map[string]float64{}},

		scrapeInterval: opts.ScrapeInterval,
		maxScrapes:     opts.MaxConcurrentScrapes,
	}
	// Series that exist before the first step, so rate() and dashboards
	// have a zero to start from.
	for _, pool := range backend.Pools() {
		for _, c := range backend.Categories() {
			p.memory.WithLabelValues(pool.String(), c.String())
		}
		p.memoryPeak.WithLabelValues(pool.String())
	}
	for _, op := range CommOpLabels() {
		p.commBytes.WithLabelValues(op)
		p.commSeconds.WithLabelValues(op)
	}
	cs := []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		p.step, p.tokens, p.tokensPerSec, p.stepDuration, p.loss, p.lr, p.gradNorm, p.lossScale,
		p.skipped, p.mfu, p.memory, p.memoryPeak, p.commBytes, p.commSeconds, p.checkpoint,
	}
	if opts.GPUs != nil {
		cs = append(cs, newGPUCollector(rl, opts.GPUs))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register Prometheus collector: %w", err)
		}
	}
	return p, nil
}

// Registry is the registry the metrics live on, for adding collectors or
// gathering in tests. The caller must not unregister gotrain's collectors.
func (p *Prometheus) Registry() *prometheus.Registry { return p.reg }

// ObserveStep records one optimizer step: s as written to metrics.jsonl
// (s.Tokens and s.SkippedSteps are cumulative), local is this rank's
// backend memory, comm its cumulative collective counters.
func (p *Prometheus) ObserveStep(s StepRecord, local backend.MemoryStats, comm CommCounters) {
	p.step.Set(float64(s.Step))
	p.tokensPerSec.Set(s.TokensPerSecond)
	p.stepDuration.Observe(s.StepSeconds)
	p.loss.Set(s.Loss)
	p.lr.Set(s.LR)
	p.gradNorm.Set(s.GradNorm)
	p.lossScale.Set(s.LossScale)
	p.mfu.Set(s.MFU)
	for _, pool := range backend.Pools() {
		for _, c := range backend.Categories() {
			p.memory.WithLabelValues(pool.String(), c.String()).Set(float64(local.Current[pool][c]))
		}
		p.memoryPeak.WithLabelValues(pool.String()).Set(float64(local.Peak[pool]))
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	p.tokens.Add(float64(increase(&p.last.tokens, s.Tokens)))
	p.skipped.Add(float64(increase(&p.last.skipped, int64(s.SkippedSteps))))
	for op, c := range comm {
		lb := p.last.commBytes[op]
		p.commBytes.WithLabelValues(op).Add(float64(increase(&lb, c.Bytes)))
		p.last.commBytes[op] = lb
		ls := p.last.commSeconds[op]
		p.commSeconds.WithLabelValues(op).Add(increase(&ls, c.Seconds))
		p.last.commSeconds[op] = ls
	}
}

// ObserveCheckpoint records how long the last checkpoint save took.
func (p *Prometheus) ObserveCheckpoint(seconds float64) { p.checkpoint.Set(seconds) }

// increase moves *last to now and returns by how much it grew; a decrease
// or a non-finite value counts as no growth.
func increase[T int64 | float64](last *T, now T) T {
	d := now - *last
	if f := float64(now); math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	*last = now
	if d < 0 {
		return 0
	}
	return d
}

// MFU is model FLOPs utilization, the fraction of the hardware's peak a
// rank's training achieves:
//
//	MFU = tokens/s per rank × FLOPs/token ÷ peak FLOP/s
//
// with FLOPs/token from model.Config.FlopsPerToken (6 × the weights used in
// matmuls per token, plus the causal half of attention's T×T scores), or
// for LoRA model.AdapterLayout.FlopsPerToken (4 × the frozen weights, 6 ×
// the adapters').
// peakFLOPS ≤ 0 means the peak is unknown and gives 0. The result is at
// most 1: a step faster than the peak means the peak was measured low (a
// CPU roofline timed while the machine was busy), and the fraction is
// then the whole of what was measured, not more.
func MFU(tokensPerSecondPerRank, flopsPerToken, peakFLOPS float64) float64 {
	if peakFLOPS <= 0 {
		return 0
	}
	return min(1, tokensPerSecondPerRank*flopsPerToken/peakFLOPS)
}
