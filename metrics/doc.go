// Package metrics owns what a run reports about itself: the per-step JSON
// Lines log (<output-dir>/metrics.jsonl, keys in docs/architecture.md §7)
// and the rank-0 progress line. Prometheus collectors (own registry, never
// the global one) and the NVML collector live here too.
//
// Writers are used by one goroutine (the training loop) unless they say
// otherwise.
package metrics
