package metrics

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/gotrain/gotrain/internal/regularfile"
)

// ReadLog reads a metrics.jsonl file into its step and eval records, in file
// order (a resumed run's repeated steps are kept; the plot keeps the last of
// each). A final line without its newline that does not parse is dropped: a
// killed run can stop mid-line. Any other bad line is an error naming
// path:line. Float fields written as null (non-finite values) read as NaN so
// they are never mistaken for zero.
func ReadLog(path string) (steps []StepRecord, evals []EvalRecord, err error) {
	f, _, err := regularfile.Open("metrics log", path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for lineNo := 1; ; lineNo++ {
		line, rerr := r.ReadBytes('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return nil, nil, fmt.Errorf("read metrics log %s:%d: %w", path, lineNo, rerr)
		}
		terminated := rerr == nil
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			st, ev, isEval, perr := parseLogLine(trimmed)
			switch {
			case perr != nil && !terminated:
				// Truncated tail of a killed run.
			case perr != nil:
				return nil, nil, fmt.Errorf("%s:%d: %w", path, lineNo, perr)
			case isEval:
				evals = append(evals, ev)
			default:
				steps = append(steps, st)
			}
		}
		if !terminated {
			return steps, evals, nil
		}
	}
}

// parseLogLine decodes one line; a line carrying val_loss is an eval record.
func parseLogLine(line []byte) (st StepRecord, ev EvalRecord, isEval bool, err error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return st, ev, false, err
	}
	if _, ok := raw["step"]; !ok {
		return st, ev, false, errors.New(`record has no "step" key`)
	}
	if _, ok := raw["val_loss"]; ok {
		if err := json.Unmarshal(line, &ev); err != nil {
			return st, ev, true, err
		}
		nullToNaN(raw, map[string]*float64{"val_loss": &ev.ValLoss})
		return st, ev, true, nil
	}
	if err := json.Unmarshal(line, &st); err != nil {
		return st, ev, false, err
	}
	nullToNaN(raw, map[string]*float64{
		"loss": &st.Loss, "lr": &st.LR, "grad_norm": &st.GradNorm,
		"tokens_per_second": &st.TokensPerSecond, "loss_scale": &st.LossScale,
		"mfu": &st.MFU, "step_seconds": &st.StepSeconds,
	})
	return st, ev, false, nil
}

func nullToNaN(raw map[string]json.RawMessage, fields map[string]*float64) {
	for k, p := range fields {
		if v, ok := raw[k]; ok && string(bytes.TrimSpace(v)) == "null" {
			*p = math.NaN()
		}
	}
}
