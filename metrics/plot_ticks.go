package metrics

import (
	"math"
	"strconv"

	"gonum.org/v1/plot"
)

// niceTicks places 3 to 6 major ticks at multiples of 1, 2 or 5 × 10^k and
// four minor ticks between them, and labels each major tick with as many
// digits as the tick spacing needs: gonum's default ticker labels a loss
// axis from 10.85 to 10.97 as "11, 11, 11". Every panel's step axis uses it
// over the same range, so their ticks are the same.
type niceTicks struct{}

// Ticks implements plot.Ticker.
func (niceTicks) Ticks(lo, hi float64) []plot.Tick {
	step := niceStep(hi - lo)
	first := math.Ceil(lo/step) * step
	// A range below float64's resolution at its magnitude (a step of
	// 9e18 from a damaged log) cannot be ticked this way.
	if step == 0 || !isFinite(step) || !isFinite(first) || first+step == first {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	var ticks []plot.Tick
	minor := step / 5
	for i := -5; i <= 60; i++ {
		v := first + float64(i)*minor
		if v < lo-minor*1e-9 || v > hi+minor*1e-9 {
			continue
		}
		if i%5 == 0 {
			ticks = append(ticks, plot.Tick{Value: v, Label: tickLabel(v, step, math.Max(math.Abs(lo), math.Abs(hi)))})
		} else {
			ticks = append(ticks, plot.Tick{Value: v})
		}
	}
	return ticks
}

// niceStep is the smallest of 1, 2, 5 × 10^k that cuts span into at most
// six parts.
func niceStep(span float64) float64 {
	if !(span > 0) || !isFinite(span) {
		return 0
	}
	raw := span / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

// tickLabel writes v with the digits a spacing of step needs: fixed point
// for everyday magnitudes (1750, 10.9, 0.0004), exponent form for tiny or
// huge ones (3e-05, 9.223372e+18).
func tickLabel(v, step, maxAbs float64) string {
	if math.Abs(v) < step/2 {
		return "0"
	}
	e := int(math.Floor(math.Log10(step) + 1e-9))
	if maxAbs >= 1e7 || maxAbs < 1e-3 {
		prec := int(math.Floor(math.Log10(maxAbs)+1e-9)) - e
		return strconv.FormatFloat(v, 'e', max(prec, 0), 64)
	}
	return strconv.FormatFloat(v, 'f', max(-e, 0), 64)
}
