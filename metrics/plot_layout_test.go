package metrics

import (
	"image"
	"image/color"
	"math"
	"strconv"
	"testing"

	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// quadrant returns the bounds of quadrant q (row-major: TL, TR, BL, BR).
func quadrant(img image.Image, q int) image.Rectangle {
	b := img.Bounds()
	midX, midY := (b.Min.X+b.Max.X)/2, (b.Min.Y+b.Max.Y)/2
	r := image.Rect(b.Min.X, b.Min.Y, midX, midY)
	if q%2 == 1 {
		r.Min.X, r.Max.X = midX, b.Max.X
	}
	if q >= 2 {
		r.Min.Y, r.Max.Y = midY, b.Max.Y
	}
	return r
}

// near reports whether the pixel at (x, y) is within tol of c on every
// channel: the opaque core of a line of that colour, not its antialiased
// edge or a faded variant.
func near(img image.Image, x, y int, c [3]uint32, tol uint32) bool {
	r, g, b, _ := img.At(x, y).RGBA()
	d := func(a, b uint32) uint32 {
		if a > b {
			return a - b
		}
		return b - a
	}
	return d(r>>8, c[0]) <= tol && d(g>>8, c[1]) <= tol && d(b>>8, c[2]) <= tol
}

// TestPlotSmoothsTrainLoss: a loss that alternates 3, 5, 3, 5 is a band two
// units high; TensorBoard's debiased EMA (weight 0.6) of it settles into
// 4 ± 0.25. In the middle of the loss panel the line drawn in the full train
// colour must be the smoothed one: its vertical extent a fraction of the
// band's (a quarter: 0.5 of its 2 units), with the raw band
// drawn too (faded).
func TestPlotSmoothsTrainLoss(t *testing.T) {
	var steps []StepRecord
	for s := 1; s <= 200; s++ {
		steps = append(steps, StepRecord{Step: s, Loss: 4 + float64(2*(s%2)-1), LR: 1e-3, TokensPerSecond: 100})
	}
	img := decodePlot(t, steps, nil, PlotOptions{})
	q := quadrant(img, 0)
	solid := [3]uint32{31, 119, 180}
	x0, x1 := q.Min.X+q.Dx()*3/10, q.Min.X+q.Dx()*6/10
	solidLo, solidHi, anyLo, anyHi := q.Max.Y, q.Min.Y, q.Max.Y, q.Min.Y
	for y := q.Min.Y; y < q.Max.Y; y++ {
		for x := x0; x < x1; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			r, g, b = r>>8, g>>8, b>>8
			if b > r+30 && b > g { // blue-ish: the raw or the smoothed train line
				anyLo, anyHi = min(anyLo, y), max(anyHi, y)
			}
			if near(img, x, y, solid, 30) {
				solidLo, solidHi = min(solidLo, y), max(solidHi, y)
			}
		}
	}
	if anyHi <= anyLo || solidHi < solidLo {
		t.Fatalf("no train line in the loss panel's middle (raw rows %d..%d, solid rows %d..%d)", anyLo, anyHi, solidLo, solidHi)
	}
	band, smooth := anyHi-anyLo, solidHi-solidLo
	if smooth*3 > band {
		t.Errorf("the full-colour train line spans %d px of the %d px raw band: want the EMA (about 1/4 of it), not the raw loss", smooth, band)
	}
}

// verticalGridColumns lists the columns of a quadrant where a grid line
// runs: light grey pixels over more than a third of its height, beside no
// dark column (the antialiased edge of a black axis line is light grey too).
func verticalGridColumns(img image.Image, q int) []int {
	r := quadrant(img, q)
	count := func(x int, keep func(v uint32) bool) int {
		n := 0
		for y := r.Min.Y; y < r.Max.Y; y++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if cr == cg && cg == cb && keep(cr>>8) {
				n++
			}
		}
		return n
	}
	light := func(v uint32) bool { return v > 120 && v < 250 }
	dark := func(v uint32) bool { return v < 100 }
	var cols []int
	for x := r.Min.X + 1; x < r.Max.X-1; x++ {
		if count(x, light) > r.Dy()/3 && count(x-1, dark) < r.Dy()/3 && count(x+1, dark) < r.Dy()/3 {
			cols = append(cols, x)
		}
	}
	return cols
}

// TestPlotPanelsShareStepAxis: memory is logged every 10 steps and the last
// validation comes after the last memory record; every panel must still
// span the run's steps with the same ticks, so the vertical grid lines of
// panels stacked in a column fall on the same pixels.
func TestPlotPanelsShareStepAxis(t *testing.T) {
	steps, evals := syntheticLog(t, 250, true)
	for i := range steps {
		if steps[i].Step%10 != 1 || steps[i].Step > 150 {
			steps[i].Memory = nil
		}
		if steps[i].Step < 40 {
			steps[i].LR = math.NaN()
		}
	}
	img := decodePlot(t, steps, evals, PlotOptions{})
	for _, pair := range [][2]int{{0, 2}, {1, 3}} {
		a, b := verticalGridColumns(img, pair[0]), verticalGridColumns(img, pair[1])
		if len(a) < 3 {
			t.Fatalf("quadrant %d: found %d grid columns, want the step ticks", pair[0], len(a))
		}
		if len(a) != len(b) {
			t.Errorf("quadrants %d and %d: grid lines at columns %v and %v, want the same step ticks", pair[0], pair[1], a, b)
			continue
		}
		for i := range a {
			if d := a[i] - b[i]; d < -1 || d > 1 {
				t.Errorf("quadrants %d and %d: grid lines at columns %v and %v, want the same step ticks", pair[0], pair[1], a, b)
				break
			}
		}
	}
}

// TestSmoothEMAMatchesWeightedMean checks the recurrence against its closed
// form: after n values the debiased EMA is Σ w^(n−i)·y_i / Σ w^(n−i).
func TestSmoothEMAMatchesWeightedMean(t *testing.T) {
	ys := []float64{5, 3, 4.5, math.NaN(), 2, 8, 1, 1, 6}
	const w = 0.6
	got := SmoothEMA(ys, w)
	var finite []float64
	for i, y := range ys {
		if math.IsNaN(y) {
			if !math.IsNaN(got[i]) {
				t.Errorf("value %d: NaN smoothed to %v, want it passed through", i, got[i])
			}
			continue
		}
		finite = append(finite, y)
		num, den := 0.0, 0.0
		for j, v := range finite {
			wt := math.Pow(w, float64(len(finite)-1-j))
			num += wt * v
			den += wt
		}
		if want := num / den; math.Abs(got[i]-want) > 1e-12 {
			t.Errorf("value %d: EMA %v, want %v", i, got[i], want)
		}
	}
	flat := SmoothEMA([]float64{0.1, 0.1, 0.1}, w)
	for i, v := range flat {
		if v != 0.1 {
			t.Errorf("constant series: value %d smoothed to %v, want 0.1 exactly", i, v)
		}
	}
}

func TestNiceTicksLabelEveryMajorTickDistinctly(t *testing.T) {
	for _, r := range [][2]float64{{10.85, 10.97}, {0, 6.2e-4}, {3e-6, 3.1e-5}, {1, 250}, {11500, 12500}, {0, 1e9}, {9.2233e18, 9.2234e18}} {
		seen := map[string]bool{}
		majors := 0
		for _, tk := range (niceTicks{}).Ticks(r[0], r[1]) {
			if tk.Label == "" {
				continue
			}
			majors++
			if seen[tk.Label] {
				t.Errorf("range %v: label %q twice", r, tk.Label)
			}
			seen[tk.Label] = true
			v, err := strconv.ParseFloat(tk.Label, 64)
			if err != nil || math.Abs(v-tk.Value) > 1e-9*math.Max(1, math.Abs(tk.Value)) {
				t.Errorf("range %v: tick %v labelled %q", r, tk.Value, tk.Label)
			}
		}
		if majors < 2 || majors > 7 {
			t.Errorf("range %v: %d labelled ticks, want 2 to 7", r, majors)
		}
	}
}

// renderBoth lays a log's panels out once and paints them twice, with and
// without their legends, so a test can see what a legend covers.
func renderBoth(t *testing.T, steps []StepRecord, evals []EvalRecord) (panels [][]*panel, canvases [][]draw.Canvas, with, without *image.RGBA) {
	t.Helper()
	opts, err := PlotOptions{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	panels, err = buildPanels(lastPerStep(steps), lastEvalPerStep(evals), opts)
	if err != nil {
		t.Fatal(err)
	}
	paint := func(legends bool) *image.RGBA {
		c := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, opts.Width, opts.Height))), vgimg.UseDPI(opts.DPI))
		dc := draw.New(c)
		if canvases == nil {
			canvases = arrangePanels(panels, dc)
		}
		// The same layout, drawn onto this image.
		here := make([][]draw.Canvas, len(canvases))
		for r, row := range canvases {
			for _, cv := range row {
				cv.Canvas = dc.Canvas
				here[r] = append(here[r], cv)
			}
		}
		paintPanels(panels, here, legends)
		return c.Image().(*image.RGBA)
	}
	return panels, canvases, paint(true), paint(false)
}

// crowdedMemoryLog is the layout that hid lines: the device pool flat at
// its peak near the top of the panel, a host pool flat near zero, and a
// noisy loss that fills every corner of its panel.
func crowdedMemoryLog(n int) []StepRecord {
	var steps []StepRecord
	for s := 1; s <= n; s++ {
		steps = append(steps, StepRecord{
			Step: s, Loss: 3 + 1.5*math.Sin(float64(s)*1.7), LR: 1e-3, TokensPerSecond: 1000,
			Memory: RankMemory{{
				"device": {"params": 300 << 20, "optimizer": 14 << 20},
				"host":   {"comm": 384},
				"peak":   {"device": 314 << 20, "host": 384},
			}},
		})
	}
	return steps
}

// TestPlotLegendsCoverNoData: every pixel a legend changes was background
// or grid before it was drawn, never a data line.
func TestPlotLegendsCoverNoData(t *testing.T) {
	steps := crowdedMemoryLog(120)
	evals := []EvalRecord{{Step: 40, ValLoss: 4.4}, {Step: 80, ValLoss: 1.6}, {Step: 120, ValLoss: 4.4}}
	_, _, with, without := renderBoth(t, steps, evals)
	hidden := [4]int{}
	for y := 0; y < with.Rect.Dy(); y++ {
		for x := 0; x < with.Rect.Dx(); x++ {
			a, b := with.RGBAAt(x, y), without.RGBAAt(x, y)
			if a == b {
				continue
			}
			if max(b.R, b.G, b.B)-min(b.R, b.G, b.B) > 40 { // a coloured data pixel under the legend
				q := 0
				if x >= with.Rect.Dx()/2 {
					q++
				}
				if y >= with.Rect.Dy()/2 {
					q += 2
				}
				hidden[q]++
			}
		}
	}
	for q, n := range hidden {
		if n > 0 {
			t.Errorf("quadrant %d: the legend is drawn over %d pixels of data lines", q, n)
		}
	}
}

// TestPlotMemoryLinesAllVisible: with the device pool at its peak and a
// host pool of a few hundred bytes, each of the four lines still shows
// along most of the step axis.
func TestPlotMemoryLinesAllVisible(t *testing.T) {
	_, _, _, img := renderBoth(t, crowdedMemoryLog(120), nil)
	q := quadrant(img, 3)
	for name, c := range map[string]color.RGBA{"device": colTrain, "device peak": colPeak, "host": colHost, "host peak": colTok} {
		cols := 0
		for x := q.Min.X; x < q.Max.X; x++ {
			for y := q.Min.Y; y < q.Max.Y; y++ {
				if near(img, x, y, [3]uint32{uint32(c.R), uint32(c.G), uint32(c.B)}, 12) {
					cols++
					break
				}
			}
		}
		// The data area is about 85% of the quadrant; a dashed peak over
		// its pool leaves the pool's colour in the gaps at least.
		if cols < q.Dx()/4 {
			t.Errorf("%s line shows in %d of %d columns of the memory panel, want it visible along the run", name, cols, q.Dx())
		}
	}
}

// TestPlotPanelsShareTicks: the four panels have one step range and one set
// of step ticks, whatever each series covers.
func TestPlotPanelsShareTicks(t *testing.T) {
	steps := crowdedMemoryLog(130)
	for i := range steps {
		if steps[i].Step%10 != 0 {
			steps[i].Memory = nil
		}
		if steps[i].Step < 30 {
			steps[i].TokensPerSecond = math.NaN()
		}
	}
	panels, _, _, _ := renderBoth(t, steps, []EvalRecord{{Step: 0, ValLoss: 5}})
	ref := panels[0][0].p.X
	want := ref.Tick.Marker.Ticks(ref.Min, ref.Max)
	if ref.Min != 0 || ref.Max != 130 {
		t.Errorf("step axis %v..%v, want 0..130 (the first eval to the last step)", ref.Min, ref.Max)
	}
	for r, row := range panels {
		for c, pn := range row {
			x := pn.p.X
			if x.Min != ref.Min || x.Max != ref.Max {
				t.Errorf("panel %d,%d: steps %v..%v, want %v..%v", r, c, x.Min, x.Max, ref.Min, ref.Max)
			}
			got := x.Tick.Marker.Ticks(x.Min, x.Max)
			if len(got) != len(want) {
				t.Errorf("panel %d,%d: %d ticks, want %d", r, c, len(got), len(want))
				continue
			}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("panel %d,%d: tick %d is %+v, want %+v", r, c, i, got[i], want[i])
				}
			}
		}
	}
}

// TestPlotValidationIsStraightBetweenPoints: halfway between two
// evaluations the validation line passes through their mean.
func TestPlotValidationIsStraightBetweenPoints(t *testing.T) {
	var steps []StepRecord
	for s := 1; s <= 200; s++ {
		steps = append(steps, StepRecord{Step: s, Loss: 6, LR: 1e-3, TokensPerSecond: 1000})
	}
	evals := []EvalRecord{{Step: 50, ValLoss: 5}, {Step: 150, ValLoss: 3}}
	panels, canvases, img, _ := renderBoth(t, steps, evals)
	p := panels[0][0].p
	dc := p.DataCanvas(canvases[0][0])
	tx, ty := p.Transforms(&dc)
	const dpi = 150
	px := int(math.Round(float64(tx(100)) * dpi / 72))
	py := img.Rect.Dy() - int(math.Round(float64(ty(4))*dpi/72))
	found := false
	for dy := -2; dy <= 2 && !found; dy++ {
		found = near(img, px, py+dy, [3]uint32{uint32(colVal.R), uint32(colVal.G), uint32(colVal.B)}, 30)
	}
	if !found {
		t.Errorf("no validation colour at step 100, loss 4 (pixel %d,%d): want a straight segment from (50, 5) to (150, 3)", px, py)
	}
}
