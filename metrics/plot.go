package metrics

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// PlotOptions sizes the PNG Plot draws. Zero values take the defaults.
type PlotOptions struct {
	Width, Height int    // pixels; default 1600×1200
	DPI           int    // text and line scale; default 150
	Title         string // prefixed to every panel title, e.g. the run directory
}

// Panel colours are saturated so a test (or a reader) can tell data apart from
// the black and grey axes, ticks and text.
var (
	colTrain = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	colVal   = color.RGBA{R: 214, G: 39, B: 40, A: 255}
	colLR    = color.RGBA{R: 44, G: 160, B: 44, A: 255}
	colTok   = color.RGBA{R: 148, G: 103, B: 189, A: 255}
	colPeak  = color.RGBA{R: 255, G: 127, B: 14, A: 255}
	colHost  = color.RGBA{R: 23, G: 190, B: 207, A: 255}
)

// Plot draws a 2×2 PNG of a run to w: training and validation loss (top
// left), learning rate (top right), tokens per second (bottom left) and rank
// 0's memory in MiB, current total and peak per pool (bottom right), all
// against the optimizer step. Steps repeated by a resumed run keep their last
// record; non-finite values are left out. No step records is an error.
func Plot(w io.Writer, steps []StepRecord, evals []EvalRecord, opts PlotOptions) (err error) {
	// The log is untrusted input and gonum/plot panics on some ranges it
	// cannot tick (widenDegenerate avoids the known ones); a file that
	// still trips it is an error for the user, never a crash.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("plot: cannot draw these values (%v); check metrics.jsonl for absurd numbers", p)
		}
	}()
	if len(steps) == 0 {
		return errors.New("plot: no step records (the run has not finished an optimizer step)")
	}
	if opts.Width <= 0 {
		opts.Width = 1600
	}
	if opts.Height <= 0 {
		opts.Height = 1200
	}
	if opts.DPI <= 0 {
		opts.DPI = 150
	}
	steps = lastPerStep(steps)
	evals = lastEvalPerStep(evals)

	panels := [][]*plot.Plot{make([]*plot.Plot, 2), make([]*plot.Plot, 2)}
	if panels[0][0], err = lossPanel(steps, evals, opts.Title); err != nil {
		return err
	}
	if panels[0][1], err = seriesPanel(opts.Title, "learning rate", "lr", colLR, steps,
		func(s StepRecord) float64 { return s.LR }); err != nil {
		return err
	}
	if panels[1][0], err = seriesPanel(opts.Title, "throughput", "tokens/s", colTok, steps,
		func(s StepRecord) float64 { return s.TokensPerSecond }); err != nil {
		return err
	}
	if panels[1][1], err = memoryPanel(steps, opts.Title); err != nil {
		return err
	}

	for _, row := range panels {
		for _, p := range row {
			widenDegenerate(&p.X)
			widenDegenerate(&p.Y)
		}
	}
	img := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, opts.Width, opts.Height))), vgimg.UseDPI(opts.DPI))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 2,
		PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 6,
		PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 4}
	canvases := plot.Align(panels, tiles, dc)
	for r := range panels {
		for c := range panels[r] {
			panels[r][c].Draw(canvases[r][c])
		}
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
		return fmt.Errorf("plot: write png: %w", err)
	}
	return nil
}

func newPanel(prefix, title, ylabel string) *plot.Plot {
	p := plot.New()
	if prefix != "" {
		title = prefix + ": " + title
	}
	p.Title.Text = title
	p.X.Label.Text = "step"
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	return p
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
func markEmpty(p *plot.Plot) {
	p.Title.Text += " (no data)"
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
}

func addLine(p *plot.Plot, pts plotter.XYs, c color.Color, dashed bool, legend string) error {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return fmt.Errorf("plot %q: %w", p.Title.Text, err)
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	}
	p.Add(l)
	if legend != "" {
		p.Legend.Add(legend, l)
	}
	return nil
}

func lossPanel(steps []StepRecord, evals []EvalRecord, prefix string) (*plot.Plot, error) {
	p := newPanel(prefix, "loss", "loss")
	train := finitePoints(steps, func(s StepRecord) float64 { return s.Loss })
	var val plotter.XYs
	for _, e := range evals {
		if isFinite(e.ValLoss) {
			val = append(val, plotter.XY{X: float64(e.Step), Y: e.ValLoss})
		}
	}
	if len(train) == 0 && len(val) == 0 {
		markEmpty(p)
		return p, nil
	}
	if len(train) > 0 {
		if err := addLine(p, train, colTrain, false, "train"); err != nil {
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
		p.Add(l, s)
		p.Legend.Add("validation", l, s)
	}
	p.Legend.Top = true
	return p, nil
}

func seriesPanel(prefix, title, ylabel string, c color.Color, steps []StepRecord, get func(StepRecord) float64) (*plot.Plot, error) {
	p := newPanel(prefix, title, ylabel)
	pts := finitePoints(steps, get)
	if len(pts) == 0 {
		markEmpty(p)
		return p, nil
	}
	if err := addLine(p, pts, c, false, ""); err != nil {
		return nil, err
	}
	// A constant series (a constant learning rate) would otherwise get a
	// ±1 range around it that hides its value; give it ±10% instead.
	lo, hi := pts[0].Y, pts[0].Y
	for _, q := range pts {
		lo, hi = min(lo, q.Y), max(hi, q.Y)
	}
	if lo == hi && lo != 0 {
		p.Y.Min, p.Y.Max = lo-0.1*abs(lo), hi+0.1*abs(hi)
	}
	return p, nil
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// memoryPanel plots rank 0: the sum of a pool's categories and the pool's
// peak, device first, then any other pool that holds memory.
func memoryPanel(steps []StepRecord, prefix string) (*plot.Plot, error) {
	p := newPanel(prefix, "memory (rank 0)", "MiB")
	const mib = 1 << 20
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
	drawn := false
	for i, pool := range names {
		var cur, peak plotter.XYs
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
		curCol, peakCol := color.Color(colTrain), color.Color(colPeak)
		if i > 0 {
			curCol, peakCol = colHost, colTok
		}
		if len(cur) > 0 {
			if err := addLine(p, cur, curCol, false, pool); err != nil {
				return nil, err
			}
			drawn = true
		}
		if len(peak) > 0 {
			if err := addLine(p, peak, peakCol, true, pool+" peak"); err != nil {
				return nil, err
			}
			drawn = true
		}
	}
	if !drawn {
		markEmpty(p)
		return p, nil
	}
	p.Legend.Left = true // bottom left: the axis starts at zero, so it is empty there
	p.Y.Min = 0          // memory from zero, so growth reads at its true size
	return p, nil
}

func finitePoints(steps []StepRecord, get func(StepRecord) float64) plotter.XYs {
	var pts plotter.XYs
	for _, s := range steps {
		if v := get(s); isFinite(v) {
			pts = append(pts, plotter.XY{X: float64(s.Step), Y: v})
		}
	}
	return pts
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// lastPerStep orders records by step, keeping the last record written for a
// step: a resumed run re-runs the steps after its checkpoint and appends them.
func lastPerStep(steps []StepRecord) []StepRecord {
	last := map[int]int{}
	for i, s := range steps {
		last[s.Step] = i
	}
	out := make([]StepRecord, 0, len(last))
	for _, i := range last {
		out = append(out, steps[i])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Step < out[j].Step })
	return out
}

func lastEvalPerStep(evals []EvalRecord) []EvalRecord {
	last := map[int]int{}
	for i, e := range evals {
		last[e.Step] = i
	}
	out := make([]EvalRecord, 0, len(last))
	for _, i := range last {
		out = append(out, evals[i])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Step < out[j].Step })
	return out
}
