package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// gpuCollector exports what NVML reports about each GPU at scrape time, so
// the numbers are as fresh as the scrape and cost nothing between scrapes.
type gpuCollector struct {
	query func() ([]GPUInfo, error)
	used  *prometheus.Desc
	util  *prometheus.Desc
}

func newGPUCollector(constLabels prometheus.Labels, query func() ([]GPUInfo, error)) *gpuCollector {
	return &gpuCollector{
		query: query,
		used: prometheus.NewDesc("gotrain_gpu_memory_used_bytes", "Device memory in use on the GPU, as NVML reports it.",
			[]string{"gpu"}, constLabels),
		util: prometheus.NewDesc("gotrain_gpu_utilization_ratio", "Fraction of NVML's last sample period in which a kernel ran.",
			[]string{"gpu"}, constLabels),
	}
}

func (g *gpuCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.used
	ch <- g.util
}

func (g *gpuCollector) Collect(ch chan<- prometheus.Metric) {
	gpus, err := g.query()
	if err != nil {
		return
	}
	for _, gpu := range gpus {
		idx := strconv.Itoa(gpu.Index)
		ch <- prometheus.MustNewConstMetric(g.used, prometheus.GaugeValue, float64(gpu.MemoryUsedBytes), idx)
		// -1 means the GPU does not report utilization: no series rather
		// than a value outside 0..1.
		if gpu.Utilization >= 0 {
			ch <- prometheus.MustNewConstMetric(g.util, prometheus.GaugeValue, gpu.Utilization, idx)
		}
	}
}
