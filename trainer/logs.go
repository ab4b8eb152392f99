package trainer

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/checkpoint"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/metrics"
)

// runLogs are what rank 0 writes as the run goes: metrics.jsonl, the
// config's monitors (DeepSpeed's csv_monitor and tensorboard), the
// progress line and the wall-clock breakdown. Other ranks open no files.
type runLogs struct {
	jsonl     *metrics.JSONL // nil without an output directory
	monitors  metrics.Monitors
	prog      metrics.Progress
	breakdown metrics.Breakdown
}

// open opens metrics.jsonl and the config's monitors on rank 0, once
// the start step is settled: a resume drops the records beyond its
// checkpoint (the run computes those steps again); a fresh start moves an
// earlier run's logs aside. See metrics/logfiles.go.
func (l *runLogs) open(o Options, ck *checkpoint.Reader) error {
	if err := l.openMonitors(o); err != nil {
		return err
	}
	if ck != nil {
		if err := l.monitors.ResumeAt(ck.Meta().Samples); err != nil {
			return err
		}
	} else {
		moved, err := l.monitors.SetAside(time.Now())
		if err != nil {
			return err
		}
		for _, m := range moved {
			fmt.Fprintf(o.Log, "moved an earlier run's monitor file to %s\n", m)
		}
	}
	if o.OutputDir == "" {
		return nil
	}
	if err := os.MkdirAll(o.OutputDir, 0o755); err != nil {
		return fmt.Errorf("--output-dir: %w", err)
	}
	resumeStep := 0
	if ck != nil {
		resumeStep = int(ck.Meta().Step)
	}
	log, note, err := metrics.OpenRunLog(filepath.Join(o.OutputDir, "metrics.jsonl"), resumeStep)
	if note != "" {
		fmt.Fprintln(o.Log, note)
	}
	l.jsonl = log
	return err
}

// openMonitors starts the config's monitor blocks: csv_monitor and
// tensorboard write files (under output_path, else the output directory);
// wandb and comet need a network gotrain never uses.
func (l *runLogs) openMonitors(o Options) error {
	c := o.Config
	dir := func(p string) string {
		if p == "" {
			return o.OutputDir
		}
		return p
	}
	if c.CSVMonitor.Enabled {
		m, err := metrics.NewCSVMonitor(dir(c.CSVMonitor.OutputPath), c.CSVMonitor.JobName)
		if err != nil {
			return fmt.Errorf("csv_monitor: %w", err)
		}
		l.monitors = append(l.monitors, m)
	}
	if c.TensorBoard.Enabled {
		m, err := metrics.NewTensorBoard(dir(c.TensorBoard.OutputPath), c.TensorBoard.JobName)
		if err != nil {
			return fmt.Errorf("tensorboard: %w", err)
		}
		l.monitors = append(l.monitors, m)
	}
	if c.WandB.Enabled {
		fmt.Fprintln(o.Log, metrics.UnsupportedMonitorWarning("wandb"))
	}
	if c.Comet.Enabled {
		fmt.Fprintln(o.Log, metrics.UnsupportedMonitorWarning("comet"))
	}
	return nil
}

// write appends a record to metrics.jsonl.
func (l *runLogs) write(rec any) error {
	if l.jsonl == nil {
		return nil
	}
	return l.jsonl.Write(rec)
}

// sync makes the files durable up to what is written.
func (l *runLogs) sync() error {
	if l.jsonl != nil {
		if err := l.jsonl.Sync(); err != nil {
			return err
		}
	}
	if err := l.monitors.Sync(); err != nil {
		return fmt.Errorf("monitor: %w", err)
	}
	return nil
}

// close closes the files.
func (l *runLogs) close() {
	if l.jsonl != nil {
		l.jsonl.Close()
	}
	if len(l.monitors) > 0 {
		l.monitors.Close()
	}
}

// memory gathers every rank's memory accounting for the log: each rank's
// backend.MemoryStats travels as its little-endian int64 bytes (two I32
// words a count, so sizes beyond 2 GiB stay exact) in one all-gather.
func (r *run) memory() (metrics.RankMemory, error) {
	local := r.be.Memory()
	if r.world == 1 {
		return metrics.RankMemory{metrics.MemoryOf(local)}, nil
	}
	raw, err := binary.Append(nil, binary.LittleEndian, local)
	if err != nil {
		return nil, err
	}
	if err := r.be.Upload(r.memBufs[0], raw); err != nil {
		return nil, err
	}
	err = r.eng.Collective(r.cctx, "memory report", func(ctx context.Context, c comm.Comm) error {
		return c.AllGather(ctx, r.memBufs[1], r.memBufs[0])
	})
	if err != nil {
		return nil, err
	}
	all := make([]byte, r.memBufs[1].Bytes())
	if err := r.be.Download(all, r.memBufs[1]); err != nil {
		return nil, err
	}
	out := make(metrics.RankMemory, r.world)
	for rank := range out {
		var s backend.MemoryStats
		if _, err := binary.Decode(all[rank*len(raw):], binary.LittleEndian, &s); err != nil {
			return nil, err
		}
		out[rank] = metrics.MemoryOf(s)
	}
	return out, nil
}
