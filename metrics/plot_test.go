package metrics

import (
	"bytes"
	"image"
	"image/png"
	"math"
	"path/filepath"
	"testing"
)

// syntheticLog writes a run through the real JSONL writer: loss decaying
// from 5 towards 2, a warmup-then-decay learning rate, evals every 50 steps
// and rank-0 memory that grows, then reads it back.
func syntheticLog(t *testing.T, n int, withMemory bool) ([]StepRecord, []EvalRecord) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	j, err := OpenJSONL(path)
	if err != nil {
		t.Fatal(err)
	}
	for s := 1; s <= n; s++ {
		rec := StepRecord{
			Step:            s,
			Loss:            2 + 3*math.Exp(-float64(s)/80),
			LR:              6e-4 * math.Min(1, float64(s)/20) * (1 - float64(s)/float64(n+1)),
			TokensPerSecond: 12000 + 500*math.Sin(float64(s)/7),
		}
		if withMemory {
			rec.Memory = RankMemory{
				{"device": {"params": 300 << 20, "activations": int64(100+s%40) << 20}, "peak": {"device": 520 << 20}},
				{"device": {"params": 1 << 30}, "peak": {"device": 2 << 30}},
			}
		}
		if err := j.Write(rec); err != nil {
			t.Fatal(err)
		}
		if s%50 == 0 {
			if err := j.Write(EvalRecord{Step: s, ValLoss: 2.1 + 3*math.Exp(-float64(s)/80), Batches: 4}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	steps, evals, err := ReadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != n || len(evals) != n/50 {
		t.Fatalf("read back %d steps, %d evals; want %d, %d", len(steps), len(evals), n, n/50)
	}
	return steps, evals
}

// colouredPixels counts, per quadrant (row-major: TL, TR, BL, BR), pixels
// whose channels differ by more than a grey antialiasing shade can: axes,
// ticks, grid and text are black or grey; only data lines are coloured.
func colouredPixels(img image.Image) [4]int {
	var n [4]int
	b := img.Bounds()
	midX, midY := (b.Min.X+b.Max.X)/2, (b.Min.Y+b.Max.Y)/2
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			hi := max(r, g, bl) >> 8
			lo := min(r, g, bl) >> 8
			if hi-lo > 40 {
				q := 0
				if x >= midX {
					q++
				}
				if y >= midY {
					q += 2
				}
				n[q]++
			}
		}
	}
	return n
}

func decodePlot(t *testing.T, steps []StepRecord, evals []EvalRecord, opts PlotOptions) image.Image {
	t.Helper()
	var buf bytes.Buffer
	if err := Plot(&buf, steps, evals, opts); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("output is not a PNG: %v", err)
	}
	return img
}

func TestPlotDrawsFourPanels(t *testing.T) {
	steps, evals := syntheticLog(t, 300, true)
	img := decodePlot(t, steps, evals, PlotOptions{})
	if b := img.Bounds(); b.Dx() != 1600 || b.Dy() != 1200 {
		t.Fatalf("image is %dx%d, want 1600x1200", b.Dx(), b.Dy())
	}
	names := [4]string{"loss", "learning rate", "tokens/s", "memory"}
	for q, c := range colouredPixels(img) {
		// A 1.5 pt line across a ~700 px wide panel colours well over 500 pixels.
		if c < 500 {
			t.Errorf("%s panel: %d coloured pixels, want a drawn series (>= 500)", names[q], c)
		}
	}
}

func TestPlotLeavesPanelWithoutDataUncoloured(t *testing.T) {
	// The negative control for the quadrant check: no memory in the log
	// leaves the memory panel with axes only.
	steps, evals := syntheticLog(t, 120, false)
	img := decodePlot(t, steps, evals, PlotOptions{Width: 800, Height: 600})
	if b := img.Bounds(); b.Dx() != 800 || b.Dy() != 600 {
		t.Fatalf("image is %dx%d, want 800x600", b.Dx(), b.Dy())
	}
	c := colouredPixels(img)
	if c[3] != 0 {
		t.Errorf("memory panel without data has %d coloured pixels, want 0", c[3])
	}
	for q := range 3 {
		if c[q] < 200 {
			t.Errorf("quadrant %d: %d coloured pixels, want a drawn series", q, c[q])
		}
	}
}

func TestPlotKeepsLastRecordOfRepeatedSteps(t *testing.T) {
	steps := []StepRecord{{Step: 1, Loss: 5}, {Step: 2, Loss: 9}, {Step: 3, Loss: 9}, {Step: 2, Loss: 4}, {Step: 3, Loss: 3}}
	got := lastPerStep(steps)
	want := []StepRecord{{Step: 1, Loss: 5}, {Step: 2, Loss: 4}, {Step: 3, Loss: 3}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Step != want[i].Step || got[i].Loss != want[i].Loss {
			t.Errorf("record %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestPlotSkipsNonFiniteValues(t *testing.T) {
	steps, evals := syntheticLog(t, 60, true)
	steps[10].Loss = math.NaN()
	steps[11].TokensPerSecond = math.Inf(1)
	decodePlot(t, steps, evals, PlotOptions{Width: 400, Height: 300})
}

func TestPlotEmptyLogIsAnError(t *testing.T) {
	var buf bytes.Buffer
	if err := Plot(&buf, nil, []EvalRecord{{Step: 1, ValLoss: 3}}, PlotOptions{}); err == nil {
		t.Fatal("plotting a log without step records: want an error")
	}
	if buf.Len() != 0 {
		t.Errorf("wrote %d bytes on error", buf.Len())
	}
}

// A damaged log with one step at 2^63-1 (found by FuzzReadLogAndPlot) made
// gonum's ticker panic: the ±1 padding of a one-point axis vanishes in
// float64 rounding. It now draws.
func TestPlotOnePointAtHugeStep(t *testing.T) {
	var buf bytes.Buffer
	steps := []StepRecord{{Step: math.MaxInt64, Loss: 1e300, LR: 1, TokensPerSecond: 1}}
	if err := Plot(&buf, steps, nil, PlotOptions{Width: 200, Height: 150}); err != nil {
		t.Fatal(err)
	}
	if buf.Len() == 0 {
		t.Error("no PNG written")
	}
}
