package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/metrics"
	"github.com/gotrain/gotrain/trainer"
)

// formatEstimate writes est as a table: one rank's device and host memory
// by category, steady after start-up and at the step's peak, the host
// total per node, and DeepSpeed's own estimate for comparison.
func formatEstimate(w io.Writer, est trainer.MemoryEstimate) error {
	var b strings.Builder
	describe(&b, est)
	tab := [][]string{{"per rank", "device", "host"}}
	used, unused := "activations (checkpointed)", "activations"
	if !est.Checkpointing {
		used, unused = unused, used
	}
	rows := []struct {
		name string
		v    trainer.PoolBytes
	}{
		{"parameters", est.Steady.Params},
		{"gradients", est.Steady.Grads},
		{"master weights", est.Steady.Master},
		{"optimizer states", est.Steady.Optimizer},
		{"activations", est.ActivationsFull},
		{"activations (checkpointed)", est.ActivationsCheckpointed},
		{"buffers", est.Steady.Buffers},
		{"total (steady)", est.Steady.Total()},
		{"peak (during a step)", est.Peak.Total()},
	}
	for _, r := range rows {
		name := r.name
		switch name {
		case used:
			name += " *"
		case unused:
			name += " (not used)"
		}
		tab = append(tab, []string{name, metrics.HumanBytes(r.v.Device), metrics.HumanBytes(r.v.Host)})
	}
	writeTable(&b, tab)
	fmt.Fprintf(&b, "* the activations this run keeps (in the totals)\n")
	if est.Stage == 3 {
		fmt.Fprintf(&b, "peak includes %s of gathered parameters (%s elements at most)\n",
			metrics.HumanBytes(est.Peak.Params.Device-est.Steady.Params.Device), groupDigits(est.PeakGatheredElements))
	}
	if win := est.Peak.Buffers.Device - est.Steady.Buffers.Device; win > 0 {
		fmt.Fprintf(&b, "peak includes %s of gradient reduction windows\n", metrics.HumanBytes(win))
	}
	fmt.Fprintf(&b, "host per node (%d ranks): %s steady, %s peak\n", est.RanksPerNode,
		metrics.HumanBytes(est.HostPerNode.Steady), metrics.HumanBytes(est.HostPerNode.Peak))
	if d := est.DeepSpeed; d != nil {
		fmt.Fprintf(&b, "DeepSpeed %s (model states only): %s per GPU, %s CPU per node", d.Function,
			metrics.HumanBytes(d.DevicePerRank), metrics.HumanBytes(d.HostPerNode))
		if d.LargestLayerParams > 0 {
			fmt.Fprintf(&b, " (largest layer %s params)", groupDigits(d.LargestLayerParams))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// describe writes the lines that say what was estimated.
func describe(b *strings.Builder, est trainer.MemoryEstimate) {
	m := est.Model
	vocab := fmt.Sprintf("vocab %d", m.V)
	if m.Vp != m.V {
		vocab += fmt.Sprintf(" (padded %d)", m.Vp)
	}
	fmt.Fprintf(b, "%s, %s | Ψ = %s parameters | N = %d ranks", m.Summary(), vocab, groupDigits(est.NumParams), est.World)
	if est.Nodes > 1 {
		fmt.Fprintf(b, " on %d nodes", est.Nodes)
	}
	fmt.Fprintf(b, " | ZeRO stage %d\n", est.Stage)
	fmt.Fprintf(b, "micro-batch %d × seq %d | %s parameters, %s gradients", est.MicroBatch, est.SeqLen, est.ParamDType, est.GradDType)
	var off []string
	if est.OffloadOptimizer {
		off = append(off, "optimizer")
	}
	if est.OffloadParam {
		off = append(off, "parameters")
	}
	if len(off) > 0 {
		fmt.Fprintf(b, " | offload: %s to cpu", strings.Join(off, " and "))
	}
	switch {
	case est.CPUCheckpointing:
		b.WriteString(" | activation checkpointing, block inputs in host memory")
	case est.Checkpointing:
		b.WriteString(" | activation checkpointing")
	}
	b.WriteString("\n")
}

// formatMeasured writes the memory a rank measured (backend accounting:
// current by category, peak by pool) next to the estimate, category by
// category: the start-up table train prints on rank 0. The measured host
// column adds the pinned and pageable pools.
func formatMeasured(w io.Writer, stats backend.MemoryStats, est trainer.MemoryEstimate) error {
	host := func(c backend.Category) int64 {
		return stats.Current[backend.HostPinned][c] + stats.Current[backend.Host][c]
	}
	dev := func(c backend.Category) int64 { return stats.Current[backend.Device][c] }
	both := func(cs ...backend.Category) trainer.PoolBytes {
		var p trainer.PoolBytes
		for _, c := range cs {
			p.Device += dev(c)
			p.Host += host(c)
		}
		return p
	}
	rows := []struct {
		name           string
		measured, want trainer.PoolBytes
	}{
		{"parameters", both(backend.Params), est.Steady.Params},
		{"gradients", both(backend.Grads), est.Steady.Grads},
		{"master weights", both(backend.Master), est.Steady.Master},
		{"optimizer states", both(backend.Optimizer), est.Steady.Optimizer},
		{"activations", both(backend.Activations), est.Steady.Activations},
		{"buffers", both(backend.Comm, backend.Workspace), est.Steady.Buffers},
		{"total", trainer.PoolBytes{Device: stats.PoolTotal(backend.Device),
			Host: stats.PoolTotal(backend.HostPinned) + stats.PoolTotal(backend.Host)}, est.Steady.Total()},
		{"peak", trainer.PoolBytes{Device: stats.Peak[backend.Device],
			Host: stats.Peak[backend.HostPinned] + stats.Peak[backend.Host]}, est.Peak.Total()},
	}
	var b strings.Builder
	tab := [][]string{{"memory per rank", "device", "estimated", "host", "estimated"}}
	for _, r := range rows {
		tab = append(tab, []string{r.name, metrics.HumanBytes(r.measured.Device), metrics.HumanBytes(r.want.Device),
			metrics.HumanBytes(r.measured.Host), metrics.HumanBytes(r.want.Host)})
	}
	writeTable(&b, tab)
	b.WriteString("peak: measured so far (start-up); estimated for a step\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTable writes rows with the first column left-aligned and the others
// right-aligned, two spaces apart.
func writeTable(b *strings.Builder, rows [][]string) {
	var width []int
	for _, r := range rows {
		for i, cell := range r {
			if i == len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], utf8.RuneCountInString(cell))
		}
	}
	for _, r := range rows {
		for i, cell := range r {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(cell))
			if i == 0 {
				b.WriteString(cell + pad)
				continue
			}
			b.WriteString("  " + pad + cell)
		}
		b.WriteString("\n")
	}
}

// groupDigits writes n with thousands separators (124,475,904).
func groupDigits(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	return b.String()
}
