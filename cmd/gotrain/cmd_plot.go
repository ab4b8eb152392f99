package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/internal/atomicfile"
	"github.com/gotrain/gotrain/metrics"
)

// plotCommand is `gotrain plot`: a PNG of a run's metrics.jsonl.
func plotCommand() *cli.Command {
	return &cli.Command{
		Name:      "plot",
		Usage:     "draw a run's loss, learning rate, throughput and memory from OUTPUT_DIR/metrics.jsonl as a PNG",
		ArgsUsage: "OUTPUT_DIR",
		UsageText: "gotrain plot OUTPUT_DIR [-o FILE.png]",
		Description: "Reads OUTPUT_DIR/metrics.jsonl (what `gotrain train --output-dir` writes) and draws four panels\n" +
			"on one step axis: training loss (raw, faded, under TensorBoard's debiased EMA; --smoothing sets\n" +
			"its weight) and validation loss, learning rate, tokens per second, and rank 0's memory in MiB\n" +
			"(current total and peak of each pool). Works on a running or killed run:\n" +
			"a half-written last line is skipped, and steps a resumed run repeated show their latest values.\n" +
			"Writes OUTPUT_DIR/metrics.png unless -o is given.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "PNG `FILE` to write (default: OUTPUT_DIR/metrics.png)"},
			&cli.IntFlag{Name: "width", Value: 1600, Usage: "image width in `PIXELS`"},
			&cli.IntFlag{Name: "height", Value: 1200, Usage: "image height in `PIXELS`"},
			&cli.Float64Flag{Name: "smoothing", Value: metrics.DefaultSmoothing,
				Usage: "`WEIGHT` in [0, 1) of the EMA drawn over the train loss, as TensorBoard's smoothing slider (0: raw loss only)"},
		},
		Action: runPlot,
	}
}

func runPlot(c *cli.Context) error {
	// urfave/cli stops parsing flags at the first argument; accept the
	// documented `plot DIR -o FILE` order too.
	out := c.String("output")
	args := c.Args().Slice()
	var dirs []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" || a == "--output" || a == "-output":
			if i+1 >= len(args) {
				return fmt.Errorf("plot: %s needs a file name", a)
			}
			out = args[i+1]
			i++
		case strings.HasPrefix(a, "-o=") || strings.HasPrefix(a, "--output="):
			out = a[strings.IndexByte(a, '=')+1:]
		case strings.HasPrefix(a, "-") && a != "-":
			return fmt.Errorf("plot: unknown flag %q after OUTPUT_DIR (see gotrain plot --help)", a)
		default:
			dirs = append(dirs, a)
		}
	}
	if len(dirs) != 1 {
		return fmt.Errorf("plot: want one OUTPUT_DIR (the run's --output-dir), got %d arguments", len(dirs))
	}
	dir := dirs[0]
	logPath := filepath.Join(dir, "metrics.jsonl")
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("plot: %s is not a directory (pass the run's --output-dir)", dir)
	}
	if _, err := os.Stat(logPath); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("plot: %s has no metrics.jsonl: the run has not logged a step yet, or this is not a run's output directory", dir)
	}
	steps, evals, err := metrics.ReadLog(logPath)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if len(steps) == 0 {
		return fmt.Errorf("plot: %s holds no step records yet (the run has not finished an optimizer step)", logPath)
	}
	if out == "" {
		out = filepath.Join(dir, "metrics.png")
	}
	smoothing := c.Float64("smoothing")
	if smoothing < 0 || smoothing >= 1 {
		return fmt.Errorf("plot: --smoothing %v is not in [0, 1) (TensorBoard's default is %v; 0 draws the raw loss only)", smoothing, metrics.DefaultSmoothing)
	}
	if smoothing == 0 {
		smoothing = -1 // PlotOptions: negative draws the raw loss alone
	}
	err = atomicfile.WriteWith(out, func(w io.Writer) error {
		return metrics.Plot(w, steps, evals, metrics.PlotOptions{
			Width: c.Int("width"), Height: c.Int("height"), Title: filepath.Base(filepath.Clean(dir)), Smoothing: smoothing})
	})
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	_, err = fmt.Fprintf(c.App.Writer, "wrote %s (%d steps, %d evals)\n", out, len(steps), len(evals))
	return err
}
