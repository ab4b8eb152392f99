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
	// Smoothing is the weight of the EMA drawn over the raw train loss, in
	// [0, 1): 0 takes DefaultSmoothing, a negative value draws the raw loss
	// alone.
	Smoothing float64
}

// Panel colours are saturated so a test (or a reader) can tell data apart from
// the black and grey axes, ticks and text.
var (
	colTrain = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	// colTrainRaw is colTrain at 35% over the white background, as
	// TensorBoard fades the raw series under its smoothed line.
	colTrainRaw = color.RGBA{R: 177, G: 207, B: 229, A: 255}
	colVal      = color.RGBA{R: 214, G: 39, B: 40, A: 255}
	colLR       = color.RGBA{R: 44, G: 160, B: 44, A: 255}
	colTok      = color.RGBA{R: 148, G: 103, B: 189, A: 255}
	colPeak     = color.RGBA{R: 255, G: 127, B: 14, A: 255}
	colHost     = color.RGBA{R: 23, G: 190, B: 207, A: 255}
)

// Plot draws a 2×2 PNG of a run to w: training loss (raw, faded, under
// its debiased EMA) and validation loss (top left), learning rate (top
// right), tokens per second (bottom left) and rank 0's memory in MiB,
// current total and peak per pool (bottom right). Every panel spans the
// same steps with the same ticks. Steps repeated by a resumed run keep
// their last record; non-finite values are left out. No step records is an
// error.
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
	opts, err = opts.withDefaults()
	if err != nil {
		return err
	}
	panels, err := buildPanels(lastPerStep(steps), lastEvalPerStep(evals), opts)
	if err != nil {
		return err
	}
	img := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, opts.Width, opts.Height))), vgimg.UseDPI(opts.DPI))
	dc := draw.New(img)
	paintPanels(panels, arrangePanels(panels, dc), true)
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
		return fmt.Errorf("plot: write png: %w", err)
	}
	return nil
}

// withDefaults fills the zero fields of o and checks the smoothing weight.
func (o PlotOptions) withDefaults() (PlotOptions, error) {
	if o.Smoothing >= 1 || math.IsNaN(o.Smoothing) {
		return o, fmt.Errorf("plot: smoothing weight %v is not below 1 (an EMA weight in [0, 1); TensorBoard's default is 0.6)", o.Smoothing)
	}
	if o.Width <= 0 {
		o.Width = 1600
	}
	if o.Height <= 0 {
		o.Height = 1200
	}
	if o.DPI <= 0 {
		o.DPI = 150
	}
	if o.Smoothing == 0 {
		o.Smoothing = DefaultSmoothing
	}
	return o, nil
}

// arrangePanels lays the 2×2 grid out on dc and places every legend;
// a legend that needs headroom changes its panel's y range, so the layout
// is redone until it settles (twice at most in practice).
func arrangePanels(panels [][]*panel, dc draw.Canvas) [][]draw.Canvas {
	grid := make([][]*plot.Plot, len(panels))
	for r, row := range panels {
		for _, pn := range row {
			grid[r] = append(grid[r], pn.p)
		}
	}
	tiles := draw.Tiles{Rows: 2, Cols: 2,
		PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 6,
		PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 4}
	for range 3 {
		canvases := plot.Align(grid, tiles, dc)
		changed := false
		for r, row := range panels {
			for c, pn := range row {
				changed = pn.placeLegend(canvases[r][c]) || changed
			}
		}
		if !changed {
			return canvases
		}
	}
	return plot.Align(grid, tiles, dc)
}

// paintPanels draws each panel into its canvas, then its legend over its
// data area.
func paintPanels(panels [][]*panel, canvases [][]draw.Canvas, legends bool) {
	for r, row := range panels {
		for c, pn := range row {
			pn.p.Draw(canvases[r][c])
			if legends && len(pn.names) > 0 {
				pn.legend.Draw(pn.p.DataCanvas(canvases[r][c]))
			}
		}
	}
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
