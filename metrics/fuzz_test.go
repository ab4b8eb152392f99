package metrics

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadLogAndPlot: whatever bytes metrics.jsonl holds (a killed run, a
// hand edit, another tool's file), `gotrain plot`'s reader and the drawing
// either work or return an error, and the resume trim keeps every record it
// does not drop; none of them panics.
func FuzzReadLogAndPlot(f *testing.F) {
	f.Add([]byte(`{"step":1,"loss":4.5,"lr":0.0001,"tokens_per_second":900,"memory":[{"device":{"params":1048576},"peak":{"device":2097152}}]}
{"step":2,"loss":null,"lr":0.0002,"grad_norm":null}
{"step":2,"val_loss":4.25,"val_batches":3}
{"step":3,"loss":4.0,"lr":0.00`))
	f.Add([]byte(`{"step":1e300,"loss":1e308,"lr":-1e308}` + "\n" + `{"step":-5,"loss":0,"memory":[{"host":{"x":-9}}]}` + "\n"))
	f.Add([]byte("{\"step\":1}\n{\"step\":1}\n\n\n{}\n"))
	f.Add([]byte(`{"step":9223372036854775807,"loss":1}` + "\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		path := filepath.Join(t.TempDir(), "metrics.jsonl")
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Fatal(err)
		}
		steps, evals, err := ReadLog(path)
		if err == nil && len(steps) > 0 && len(steps) < 200 {
			_ = Plot(io.Discard, steps, evals, PlotOptions{Width: 120, Height: 90, DPI: 20})
		}
		if _, err := TrimLog(path, 1); err != nil {
			t.Fatalf("TrimLog: %v", err)
		}
	})
}
