package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/checkpoint"
)

func checkpointCommand() *cli.Command {
	return &cli.Command{
		Name:  "checkpoint",
		Usage: "inspect or export gotrain checkpoints",
		Subcommands: []*cli.Command{
			{
				Name:      "inspect",
				Usage:     "list a checkpoint directory's tags with step, world size, stage, size and checksum status; exits 1 when a tag or latest fails",
				UsageText: "gotrain checkpoint inspect OUTPUT_DIR (or OUTPUT_DIR/checkpoints)",
				Action:    runInspect,
			},
			{
				Name:      "export",
				Usage:     "write a checkpoint's weights as a Hugging Face snapshot: config.json and model.safetensors (or shards with an index)",
				UsageText: "gotrain checkpoint export --out DIR [--tag global_stepN] [--dtype fp32|bf16] [--max-shard-size 5GB] [--snapshot DIR] OUTPUT_DIR (or OUTPUT_DIR/checkpoints)",
				Description: "Writes the tag's fp32 master weights under the names transformers loads, with config.json\n" +
					"(the original model_type and architectures; torch_dtype the written dtype). A model larger than\n" +
					"--max-shard-size is split into model-0000i-of-0000K.safetensors files with\n" +
					"model.safetensors.index.json, as transformers' save_pretrained splits. tokenizer.json,\n" +
					"tokenizer_config.json and generation_config.json are copied from --snapshot, by default the\n" +
					"run's output directory (train copies them there from the snapshot it started from).",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "tag", Usage: "checkpoint `TAG` (default: the one latest names)"},
					&cli.StringFlag{Name: "out", Usage: "output `DIR`", Required: true},
					&cli.StringFlag{Name: "dtype", Value: "fp32", Usage: "stored dtype: fp32 or bf16"},
					&cli.StringFlag{Name: "max-shard-size", Value: "5GB", Usage: "largest weight file, as transformers takes it: `SIZE` in bytes or with a unit (500MB, 5GB, 2GiB)"},
					&cli.StringFlag{Name: "snapshot", Usage: "copy the tokenizer and generation files from this `DIR` (default: the checkpoints directory's parent)"},
				},
				Action: runExport,
			},
		},
	}
}

// runInspect verifies every tag (meta.json checksum, then every tensor) and
// prints one row each. It fails when any tag, or "latest", does not verify,
// so scripts can gate on it.
func runInspect(c *cli.Context) error {
	dir := c.Args().First()
	if dir == "" {
		return fmt.Errorf("checkpoint inspect: give the run's output directory or its checkpoints directory (e.g. out or out/checkpoints)")
	}
	dir = checkpointsDir(dir)
	tags, err := checkpoint.List(dir)
	if err != nil {
		return err
	}
	w := c.App.Writer
	fmt.Fprintf(w, "%-22s %8s %6s %6s %12s  %-16s %s\n", "tag", "step", "ranks", "stage", "bytes", "run", "status")
	var bad []string
	latestOK := false
	for _, t := range tags {
		status := t.Problem
		if t.Complete {
			status = "checksums ok"
			if r, err := checkpoint.Open(dir, t.Tag); err != nil {
				status = err.Error()
			} else {
				if err := r.Verify(); err != nil {
					status = err.Error()
				} else if t.Legacy {
					status += " (meta.json predates its own checksum)"
				}
				r.Close()
			}
		}
		ok := strings.HasPrefix(status, "checksums ok")
		if !ok {
			bad = append(bad, t.Tag)
		}
		latest := ""
		if t.Latest {
			latest, latestOK = " (latest)", ok
		}
		run := t.RunID
		if run == "" {
			run = "-"
		}
		fmt.Fprintf(w, "%-22s %8d %6d %6d %12d  %-16s %s%s\n", t.Tag, t.Step, t.WorldSize, t.Stage, t.Bytes, run, status, latest)
	}
	var problems []string
	if len(bad) > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d tags fail verification (%s)", len(bad), len(tags), strings.Join(bad, ", ")))
	}
	switch latest, ok, err := checkpoint.Latest(dir); {
	case err != nil:
		problems = append(problems, err.Error())
	case !ok && len(tags) > 0:
		problems = append(problems, fmt.Sprintf("there is no %q file (gotrain train --resume auto falls back to the newest tag that verifies)", checkpoint.LatestFile))
	case ok && !latestOK && !slices.Contains(bad, latest):
		problems = append(problems, fmt.Sprintf("%q names %s, which does not exist", checkpoint.LatestFile, latest))
	}
	if len(tags) == 0 {
		problems = append(problems, "no checkpoint tags in "+dir)
	}
	if len(problems) > 0 {
		return fmt.Errorf("checkpoint inspect %s: %s", dir, strings.Join(problems, "; "))
	}
	return nil
}

// runExport is checkpoint export.
func runExport(c *cli.Context) error {
	dir := c.Args().First()
	if dir == "" {
		return fmt.Errorf("checkpoint export: give the run's output directory or its checkpoints directory (e.g. out or out/checkpoints)")
	}
	dir = checkpointsDir(dir)
	dt, err := backend.ParseDType(c.String("dtype"))
	if err != nil || (dt != backend.F32 && dt != backend.BF16) {
		return fmt.Errorf("--dtype %q: want fp32 or bf16", c.String("dtype"))
	}
	size, err := parseByteSize(c.String("max-shard-size"))
	if err != nil {
		return fmt.Errorf("--max-shard-size: %w", err)
	}
	snap := c.String("snapshot")
	if snap == "" {
		snap = filepath.Dir(filepath.Clean(dir))
	} else if st, err := os.Stat(snap); err != nil || !st.IsDir() {
		return fmt.Errorf("--snapshot %s: not a directory; name the snapshot whose tokenizer.json to copy", snap)
	}
	files, err := checkpoint.ExportHF(dir, c.String("tag"), c.String("out"), checkpoint.ExportOptions{DType: dt, MaxShardSize: size, CopyFrom: snap})
	if err != nil {
		return err
	}
	what := files[0]
	if len(files) > 1 {
		what = fmt.Sprintf("%d shards, model.safetensors.index.json", len(files))
	}
	_, err = fmt.Fprintf(c.App.Writer, "wrote %s: %s and config.json\n", c.String("out"), what)
	return err
}
