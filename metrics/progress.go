package metrics

import (
	"fmt"
	"io"
	"time"
)

// Progress formats rank 0's progress line:
//
//	step   40/300 | loss 6.1234 | lr 1.00e-03 | norm 1.234 | 5,321 tok/s | MFU 41.2% | mem 812 MiB | ETA 2m10s
type Progress struct {
	W          io.Writer
	TotalSteps int
}

// Line prints one progress line for a finished step.
func (p Progress) Line(rec StepRecord, elapsed time.Duration, deviceBytes int64) {
	eta := "?"
	if rec.Step > 0 && p.TotalSteps > rec.Step {
		per := elapsed / time.Duration(rec.Step)
		eta = (per * time.Duration(p.TotalSteps-rec.Step)).Round(time.Second).String()
	} else if p.TotalSteps == rec.Step {
		eta = "0s"
	}
	fmt.Fprintf(p.W, "step %*d/%d | loss %.4f | lr %.2e | norm %.3f | %s tok/s | MFU %.1f%% | mem %s | ETA %s\n",
		digits(p.TotalSteps), rec.Step, p.TotalSteps, rec.Loss, rec.LR, rec.GradNorm,
		thousands(rec.TokensPerSecond), 100*rec.MFU, HumanBytes(deviceBytes), eta)
}

func digits(n int) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// thousands formats x rounded to an integer with comma separators.
func thousands(x float64) string {
	n := int64(x + 0.5)
	s := fmt.Sprint(n)
	out := make([]byte, 0, len(s)+len(s)/3)
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, c)
	}
	return string(out)
}

// HumanBytes formats n bytes in binary units: "0 B", "512 B", "3.2 KiB",
// "41.5 MiB", "1.25 GiB" (two decimals below 10 of a unit from MiB up).
func HumanBytes(n int64) string {
	const unit = 1024
	if n < 0 {
		return "-" + HumanBytes(-n)
	}
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	for v >= unit && i < len(units)-1 {
		v /= unit
		i++
	}
	if i >= 2 && v < 10 {
		return fmt.Sprintf("%.2f %s", v, units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}
