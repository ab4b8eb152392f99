package metrics

import (
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// legendMargin keeps a legend this far from any line: half a line width
// plus a gap the eye reads as "not touching".
const legendMargin = vg.Length(4)

// corners in the order a legend tries them: the top right first, where
// readers look for it.
var legendCorners = [4]struct{ top, left bool }{{true, false}, {true, true}, {false, false}, {false, true}}

// legendRect is where legend l draws inside the data canvas dc when
// placed at a corner, grown by legendMargin. It follows plot.Legend.Draw:
// entries stacked downwards from the top less the font's descent, or
// upwards from the bottom; icon and text against the chosen side.
func legendRect(l *plot.Legend, names []string, dc draw.Canvas, top, left bool) vg.Rectangle {
	var width, height vg.Length
	ent := entryHeight(l, names)
	em := l.TextStyle.Rectangle(" ").Max.X
	for i, e := range names {
		width = max(width, l.ThumbnailWidth+em+l.TextStyle.Rectangle(e).Max.X)
		height += ent
		if i > 0 {
			height += l.Padding
		}
	}
	descent := l.TextStyle.FontExtents().Descent
	r := vg.Rectangle{Min: vg.Point{X: dc.Min.X, Y: dc.Min.Y}, Max: vg.Point{X: dc.Min.X + width, Y: dc.Min.Y + height + descent}}
	if !left {
		r.Min.X, r.Max.X = dc.Max.X-width, dc.Max.X
	}
	if top {
		r.Max.Y = dc.Max.Y
		r.Min.Y = dc.Max.Y - height - 2*descent
	}
	r.Min.X -= legendMargin
	r.Min.Y -= legendMargin
	r.Max.X += legendMargin
	r.Max.Y += legendMargin
	return r
}

func entryHeight(l *plot.Legend, names []string) vg.Length {
	var h vg.Length
	for _, e := range names {
		h = max(h, l.TextStyle.Rectangle(e).Max.Y)
	}
	return h
}

// placeLegend puts the panel's legend in the first corner of its data area
// (in the panel's canvas c) that no line crosses. If every corner is taken it raises the top of
// the y axis until the data sit below the legend, and returns true: the
// caller lays the panels out again, since the axis labels may have changed
// width. A legend taller than most of the panel (a tiny image) stays at
// the top right over the data rather than squashing them flat.
func (pn *panel) placeLegend(c draw.Canvas) (changed bool) {
	p, leg, lines := pn.p, &pn.legend, pn.lines
	if len(pn.names) == 0 {
		return false
	}
	dc := p.DataCanvas(c)
	tx, ty := p.Transforms(&dc)
	for _, corner := range legendCorners {
		r := legendRect(leg, pn.names, dc, corner.top, corner.left)
		if !linesCross(lines, tx, ty, r) {
			leg.Top, leg.Left = corner.top, corner.left
			return false
		}
	}
	leg.Top, leg.Left = true, false
	r := legendRect(leg, pn.names, dc, true, false)
	free := float64((r.Min.Y - dc.Min.Y) / (dc.Max.Y - dc.Min.Y)) // share of the height below the legend
	hi := p.Y.Min
	for _, l := range lines {
		for _, pt := range l {
			hi = max(hi, pt.Y)
		}
	}
	if free < 0.25 || hi <= p.Y.Min || p.Y.Scale != nil && !isLinear(p.Y.Scale) {
		return false
	}
	p.Y.Max = p.Y.Min + (hi-p.Y.Min)/free
	return true
}

func isLinear(s plot.Normalizer) bool {
	_, ok := s.(plot.LinearScale)
	return ok
}

// linesCross reports whether any segment of lines, drawn through the
// transforms tx, ty, passes through r.
func linesCross(lines []plotter.XYs, tx, ty func(float64) vg.Length, r vg.Rectangle) bool {
	for _, l := range lines {
		for i := range l {
			a := vg.Point{X: tx(l[i].X), Y: ty(l[i].Y)}
			b := a
			if i > 0 {
				b = vg.Point{X: tx(l[i-1].X), Y: ty(l[i-1].Y)}
			}
			if segmentHitsRect(a, b, r) {
				return true
			}
		}
	}
	return false
}

// segmentHitsRect clips the segment a→b against r (Liang–Barsky) and
// reports whether anything is left.
func segmentHitsRect(a, b vg.Point, r vg.Rectangle) bool {
	t0, t1 := 0.0, 1.0
	dx, dy := float64(b.X-a.X), float64(b.Y-a.Y)
	clip := func(p, q float64) bool {
		if p == 0 {
			return q >= 0
		}
		t := q / p
		if p < 0 {
			if t > t1 {
				return false
			}
			t0 = max(t0, t)
		} else {
			if t < t0 {
				return false
			}
			t1 = min(t1, t)
		}
		return true
	}
	return clip(-dx, float64(a.X-r.Min.X)) && clip(dx, float64(r.Max.X-a.X)) &&
		clip(-dy, float64(a.Y-r.Min.Y)) && clip(dy, float64(r.Max.Y-a.Y)) && t0 <= t1
}
