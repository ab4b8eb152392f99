package metrics

import (
	"fmt"
	"image/color"
	"math"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// panel is one of Plot's four charts: the gonum plot, the legend drawn
// over its data area (kept apart from the plot's own so it can be placed
// where no line runs), and every series drawn, for that placement.
type panel struct {
	p      *plot.Plot
	legend plot.Legend
	names  []string
	lines  []plotter.XYs
	empty  bool
}

func newPanel(prefix, title, ylabel string) *panel {
	p := plot.New()
	if prefix != "" {
		title = prefix + ": " + title
	}
	p.Title.Text = title
	p.X.Label.Text = "step"
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	return &panel{p: p, legend: plot.NewLegend()}
}

// buildPanels draws the four panels of steps and evals (deduplicated,
// in step order) and puts them on one step axis.
func buildPanels(steps []StepRecord, evals []EvalRecord, opts PlotOptions) ([][]*panel, error) {
	loss, err := lossPanel(steps, evals, opts.Title, opts.Smoothing)
	if err != nil {
		return nil, err
	}
	lr, err := seriesPanel(opts.Title, "learning rate", "lr", colLR, steps, func(s StepRecord) float64 { return s.LR })
	if err != nil {
		return nil, err
	}
	tok, err := seriesPanel(opts.Title, "throughput", "tokens/s", colTok, steps,
		func(s StepRecord) float64 { return s.TokensPerSecond })
	if err != nil {
		return nil, err
	}
	mem, err := memoryPanel(steps, opts.Title)
	if err != nil {
		return nil, err
	}
	panels := [][]*panel{{loss, lr}, {tok, mem}}
	shareStepAxis(panels, steps, evals)
	return panels, nil
}

// shareStepAxis gives every panel the run's whole step range (a series
// logged on fewer steps, such as memory, does not set its panel's own)
// and the same ticker, so the four panels read against one another.
func shareStepAxis(panels [][]*panel, steps []StepRecord, evals []EvalRecord) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range steps {
		lo, hi = min(lo, float64(s.Step)), max(hi, float64(s.Step))
	}
	for _, e := range evals {
		lo, hi = min(lo, float64(e.Step)), max(hi, float64(e.Step))
	}
	x := plot.Axis{Min: lo, Max: hi}
	widenDegenerate(&x)
	for _, row := range panels {
		for _, pn := range row {
			pn.p.X.Min, pn.p.X.Max = x.Min, x.Max
			pn.p.X.Tick.Marker = niceTicks{}
			pn.p.Y.Tick.Marker = niceTicks{}
			widenDegenerate(&pn.p.Y)
			if !pn.empty {
				// A little room above the highest point, so no line
				// runs along the top edge of its panel.
				pn.p.Y.Max += 0.04 * (pn.p.Y.Max - pn.p.Y.Min)
			}
		}
	}
}

// widenDegenerate gives an axis whose data span no range a small one
// around its value. gonum pads such an axis by ±1, which vanishes in float64
// rounding beyond 2^53 (a step of 9e18 from a damaged log), and its ticker
// panics on the empty range that is left.
func widenDegenerate(a *plot.Axis) {
	if a.Max > a.Min || math.IsNaN(a.Min) || math.IsNaN(a.Max) {
		return
	}
	pad := math.Max(1, math.Abs(a.Min)*1e-6)
	a.Min, a.Max = a.Min-pad, a.Max+pad
}

// markEmpty keeps an empty panel drawable and says why it is empty.
func (pn *panel) markEmpty() {
	pn.empty = true
	pn.p.Title.Text += " (no data)"
	pn.p.X.Min, pn.p.X.Max, pn.p.Y.Min, pn.p.Y.Max = 0, 1, 0, 1
}

// lineStyle is how addLine draws a series.
type lineStyle struct {
	color  color.Color
	width  vg.Length // 0: 1.5 pt
	dashed bool
}

func (pn *panel) addLine(pts plotter.XYs, st lineStyle, legend string) (*plotter.Line, error) {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return nil, fmt.Errorf("plot %q: %w", pn.p.Title.Text, err)
	}
	l.Color = st.color
	l.Width = vg.Points(1.5)
	if st.width > 0 {
		l.Width = st.width
	}
	if st.dashed {
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	}
	pn.p.Add(l)
	pn.lines = append(pn.lines, pts)
	if legend != "" {
		pn.addLegend(legend, l)
	}
	return l, nil
}

func (pn *panel) addLegend(name string, thumbs ...plot.Thumbnailer) {
	pn.legend.Add(name, thumbs...)
	pn.names = append(pn.names, name)
}

// lossPanel draws the train loss raw and faded with its EMA over it (as
// TensorBoard and W&B show a noisy scalar), and the validation loss as
// points joined by straight segments: evaluations are sparse, and a
// straight segment claims nothing about the steps between them.
func lossPanel(steps []StepRecord, evals []EvalRecord, prefix string, smoothing float64) (*panel, error) {
	pn := newPanel(prefix, "loss", "loss")
	train := finitePoints(steps, func(s StepRecord) float64 { return s.Loss })
	var val plotter.XYs
	for _, e := range evals {
		if isFinite(e.ValLoss) {
			val = append(val, plotter.XY{X: float64(e.Step), Y: e.ValLoss})
		}
	}
	if len(train) == 0 && len(val) == 0 {
		pn.markEmpty()
		return pn, nil
	}
	if len(train) > 0 && smoothing > 0 {
		if _, err := pn.addLine(train, lineStyle{color: colTrainRaw, width: vg.Points(1)}, "train (raw)"); err != nil {
			return nil, err
		}
		ys := make([]float64, len(train))
		for i, q := range train {
			ys[i] = q.Y
		}
		ema := make(plotter.XYs, len(train))
		for i, y := range SmoothEMA(ys, smoothing) {
			ema[i] = plotter.XY{X: train[i].X, Y: y}
		}
		name := "train (EMA " + strconv.FormatFloat(smoothing, 'g', 3, 64) + ")"
		if _, err := pn.addLine(ema, lineStyle{color: colTrain, width: vg.Points(1.75)}, name); err != nil {
			return nil, err
		}
	} else if len(train) > 0 {
		if _, err := pn.addLine(train, lineStyle{color: colTrain}, "train"); err != nil {
			return nil, err
		}
	}
	if len(val) > 0 {
		l, s, err := plotter.NewLinePoints(val)
		if err != nil {
			return nil, fmt.Errorf("plot loss: %w", err)
		}
		l.Color, l.Width = colVal, vg.Points(1.5)
		s.Color, s.Shape = colVal, draw.CircleGlyph{}
		pn.p.Add(l, s)
		pn.lines = append(pn.lines, val)
		pn.addLegend("validation", l, s)
	}
	return pn, nil
}

func seriesPanel(prefix, title, ylabel string, c color.Color, steps []StepRecord, get func(StepRecord) float64) (*panel, error) {
	pn := newPanel(prefix, title, ylabel)
	pts := finitePoints(steps, get)
	if len(pts) == 0 {
		pn.markEmpty()
		return pn, nil
	}
	if _, err := pn.addLine(pts, lineStyle{color: c}, ""); err != nil {
		return nil, err
	}
	// A constant series (a constant learning rate) would otherwise get a
	// ±1 range around it that hides its value; give it ±10% instead.
	lo, hi := pts[0].Y, pts[0].Y
	for _, q := range pts {
		lo, hi = min(lo, q.Y), max(hi, q.Y)
	}
	if lo == hi && lo != 0 {
		pn.p.Y.Min, pn.p.Y.Max = lo-0.1*math.Abs(lo), hi+0.1*math.Abs(hi)
	}
	return pn, nil
}

// memoryPanel plots rank 0: the sum of a pool's categories as a wide solid
// line and the pool's peak as a dashed line over it, so a pool that sits at
// its peak shows both; device first, then every other pool that holds
// memory, each in its own colours.
func memoryPanel(steps []StepRecord, prefix string) (*panel, error) {
	pn := newPanel(prefix, "memory (rank 0)", "MiB")
	drawn := false
	for i, pool := range memoryPools(steps) {
		cur, peak := memorySeries(steps, pool)
		curCol, peakCol := color.Color(colTrain), color.Color(colPeak)
		if i > 0 {
			curCol, peakCol = colHost, colTok
		}
		if len(cur) > 0 {
			if _, err := pn.addLine(cur, lineStyle{color: curCol, width: vg.Points(3)}, pool); err != nil {
				return nil, err
			}
			drawn = true
		}
		if len(peak) > 0 {
			if _, err := pn.addLine(peak, lineStyle{color: peakCol, dashed: true}, pool+" peak"); err != nil {
				return nil, err
			}
			drawn = true
		}
	}
	if !drawn {
		pn.markEmpty()
		return pn, nil
	}
	pn.p.Y.Min = 0 // memory from zero, so growth reads at its true size
	return pn, nil
}

// memoryPools lists the pools rank 0 reported, device first.
func memoryPools(steps []StepRecord) []string {
	pools := map[string]bool{}
	for _, s := range steps {
		if len(s.Memory) == 0 {
			continue
		}
		for pool := range s.Memory[0] {
			if pool != "peak" {
				pools[pool] = true
			}
		}
		for pool := range s.Memory[0]["peak"] {
			pools[pool] = true
		}
	}
	names := make([]string, 0, len(pools))
	for n := range pools {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if (names[i] == "device") != (names[j] == "device") {
			return names[i] == "device"
		}
		return names[i] < names[j]
	})
	return names
}

// memorySeries is rank 0's current total (the sum of its categories) and
// peak of pool, in MiB, at the steps that logged memory.
func memorySeries(steps []StepRecord, pool string) (cur, peak plotter.XYs) {
	const mib = 1 << 20
	for _, s := range steps {
		if len(s.Memory) == 0 {
			continue
		}
		m := s.Memory[0]
		if cats, ok := m[pool]; ok {
			var sum int64
			for _, v := range cats {
				sum += v
			}
			cur = append(cur, plotter.XY{X: float64(s.Step), Y: float64(sum) / mib})
		}
		if v, ok := m["peak"][pool]; ok {
			peak = append(peak, plotter.XY{X: float64(s.Step), Y: float64(v) / mib})
		}
	}
	return cur, peak
}
