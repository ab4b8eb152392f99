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
	"github.com/gotrain/gotrain/model"
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
				Usage:     "write a checkpoint's weights as a Hugging Face snapshot: config.json and model.safetensors (or shards with an index); a LoRA run's as a PEFT adapter, or with --merge merged into its base",
				UsageText: "gotrain checkpoint export --out DIR [--tag global_stepN] [--dtype fp32|bf16|fp16] [--max-shard-size 5GB] [--snapshot DIR] [--merge [--base DIR]] OUTPUT_DIR (or OUTPUT_DIR/checkpoints)",
				Description: "Writes the tag's fp32 master weights under the names transformers loads, with config.json\n" +
					"(the original model_type and architectures; torch_dtype the written dtype). A model larger than\n" +
					"--max-shard-size is split into model-0000i-of-0000K.safetensors files with\n" +
					"model.safetensors.index.json, as transformers' save_pretrained splits. tokenizer.json,\n" +
					"tokenizer_config.json and generation_config.json are copied from --snapshot, by default the\n" +
					"run's output directory (train copies them there from the snapshot it started from).\n\n" +
					"A LoRA run's checkpoint holds the adapters only: export writes them as a PEFT adapter directory\n" +
					"(adapter_model.safetensors in the dtype they trained in, adapter_config.json). With --merge it adds\n" +
					"s·B·A to the base snapshot's weights, as PEFT's merge_and_unload does, and writes the merged model\n" +
					"as above, stored in the base's torch_dtype unless --dtype says otherwise; --base names the\n" +
					"snapshot the run started from (default: the base_model_name_or_path the checkpoint records), and\n" +
					"the tokenizer and generation files come from it unless --snapshot says otherwise.",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "tag", Usage: "checkpoint `TAG` (default: the one latest names)"},
					&cli.StringFlag{Name: "out", Usage: "output `DIR`", Required: true},
					&cli.StringFlag{Name: "dtype", Usage: "stored dtype: fp32, bf16 or fp16 (default: fp32 for a full model's master weights; a LoRA adapter's as it trained; with --merge the base's torch_dtype)"},
					&cli.StringFlag{Name: "max-shard-size", Value: "5GB", Usage: "largest weight file, as transformers takes it: `SIZE` in bytes or with a unit (500MB, 5GB, 2GiB)"},
					&cli.StringFlag{Name: "snapshot", Usage: "copy the tokenizer and generation files from this `DIR` (default: the checkpoints directory's parent; with --merge, the base)"},
					&cli.BoolFlag{Name: "merge", Usage: "a LoRA run's checkpoint: write the base model with the adapters merged in, not the adapter"},
					&cli.StringFlag{Name: "base", Usage: "with --merge: the base snapshot `DIR` the adapters were trained on (default: the one the checkpoint records)"},
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

// checkpointLoRA is the LoRA configuration tag records (nil: a full
// run's tag) and the tag's meta.json, which records it.
func checkpointLoRA(dir, tag string) (*checkpoint.LoRAConfig, string, error) {
	r, err := checkpoint.Open(dir, tag)
	if err != nil {
		return nil, "", fmt.Errorf("export: %w", err)
	}
	defer r.Close()
	return r.Meta().LoRA, filepath.Join(dir, r.Tag(), checkpoint.MetaFile), nil
}

// runExport is checkpoint export.
func runExport(c *cli.Context) error {
	dir := c.Args().First()
	if dir == "" {
		return fmt.Errorf("checkpoint export: give the run's output directory or its checkpoints directory (e.g. out or out/checkpoints)")
	}
	dir = checkpointsDir(dir)
	var dt backend.DType // 0: each export's own default
	if c.IsSet("dtype") {
		var err error
		if dt, err = backend.ParseDType(c.String("dtype")); err != nil || !dt.IsFloat() {
			return fmt.Errorf("--dtype %q: want fp32, bf16 or fp16", c.String("dtype"))
		}
	}
	size, err := parseByteSize(c.String("max-shard-size"))
	if err != nil {
		return fmt.Errorf("--max-shard-size: %w", err)
	}
	lora, record, err := checkpointLoRA(dir, c.String("tag"))
	if err != nil {
		return err
	}
	merge := c.Bool("merge")
	switch {
	case merge && lora == nil:
		return fmt.Errorf("--merge: the checkpoint holds a full model, not LoRA adapters; export it without --merge")
	case !merge && c.String("base") != "":
		return fmt.Errorf("--base is only read with --merge: add --merge to merge the adapters into it")
	case lora != nil && !merge:
		path, err := checkpoint.ExportAdapter(dir, c.String("tag"), c.String("out"), dt)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.App.Writer, "wrote %s: %s and %s (a LoRA adapter; --merge --base DIR writes the merged model)\n",
			c.String("out"), filepath.Base(path), model.AdapterConfigFile)
		return err
	}
	base := c.String("base")
	if merge && base == "" {
		if lora.Base == "" {
			return fmt.Errorf("--merge: the checkpoint records no base snapshot (the run started from random weights); name it with --base DIR")
		}
		if base, err = (checkpoint.AdapterSource{Base: lora.Base, Record: record}).BaseDir(); err != nil {
			return fmt.Errorf("--merge: %w; name the snapshot the run started from with --base DIR", err)
		}
	}
	snap := c.String("snapshot")
	switch {
	case snap == "" && merge:
		snap = base
	case snap == "":
		snap = filepath.Dir(filepath.Clean(dir))
	default:
		if st, err := os.Stat(snap); err != nil || !st.IsDir() {
			return fmt.Errorf("--snapshot %s: not a directory; name the snapshot whose tokenizer.json to copy", snap)
		}
	}
	eo := checkpoint.ExportOptions{DType: dt, MaxShardSize: size, CopyFrom: snap}
	var files []string
	if merge {
		files, err = checkpoint.ExportMerged(dir, c.String("tag"), base, c.String("out"), eo)
	} else {
		files, err = checkpoint.ExportHF(dir, c.String("tag"), c.String("out"), eo)
	}
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
