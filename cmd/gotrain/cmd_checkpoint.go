package main

import (
	"fmt"

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
				Usage:     "list a checkpoint directory's tags with step, world size, stage, size and checksum status",
				UsageText: "gotrain checkpoint inspect OUTPUT_DIR/checkpoints",
				Action: func(c *cli.Context) error {
					dir := c.Args().First()
					if dir == "" {
						return fmt.Errorf("checkpoint inspect: give the checkpoints directory (e.g. out/checkpoints)")
					}
					tags, err := checkpoint.List(dir)
					if err != nil {
						return err
					}
					w := c.App.Writer
					fmt.Fprintf(w, "%-22s %8s %6s %6s %12s  %s\n", "tag", "step", "ranks", "stage", "bytes", "status")
					for _, t := range tags {
						status := "incomplete"
						if t.Complete {
							status = "checksums ok"
							if r, err := checkpoint.Open(dir, t.Tag); err != nil {
								status = err.Error()
							} else {
								if err := r.Verify(); err != nil {
									status = err.Error()
								}
								r.Close()
							}
						}
						latest := ""
						if t.Latest {
							latest = " (latest)"
						}
						fmt.Fprintf(w, "%-22s %8d %6d %6d %12d  %s%s\n", t.Tag, t.Step, t.WorldSize, t.Stage, t.Bytes, status, latest)
					}
					return nil
				},
			},
			{
				Name:      "export",
				Usage:     "write a checkpoint's weights as Hugging Face GPT-2 model.safetensors + config.json",
				UsageText: "gotrain checkpoint export --out DIR [--tag global_stepN] [--dtype fp32|bf16] OUTPUT_DIR/checkpoints",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "tag", Usage: "checkpoint `TAG` (default: the one latest names)"},
					&cli.StringFlag{Name: "out", Usage: "output `DIR`", Required: true},
					&cli.StringFlag{Name: "dtype", Value: "fp32", Usage: "fp32 or bf16"},
				},
				Action: func(c *cli.Context) error {
					dir := c.Args().First()
					if dir == "" {
						return fmt.Errorf("checkpoint export: give the checkpoints directory (e.g. out/checkpoints)")
					}
					dt, err := backend.ParseDType(c.String("dtype"))
					if err != nil || (dt != backend.F32 && dt != backend.BF16) {
						return fmt.Errorf("--dtype %q: want fp32 or bf16", c.String("dtype"))
					}
					if err := checkpoint.ExportHF(dir, c.String("tag"), c.String("out"), dt); err != nil {
						return err
					}
					_, err = fmt.Fprintf(c.App.Writer, "wrote %s/model.safetensors and config.json\n", c.String("out"))
					return err
				},
			},
		},
	}
}
