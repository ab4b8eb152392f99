package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/config"
)

// cfgImportCommand is `gotrain config import`: an Accelerate or PyTorch FSDP
// config converted to the DeepSpeed config gotrain trains with.
func cfgImportCommand() *cli.Command {
	return &cli.Command{
		Name:      "import",
		Usage:     "convert an Accelerate YAML or PyTorch FSDP config (JSON or YAML) to a DeepSpeed JSON config",
		ArgsUsage: "FILE",
		Description: "Accelerate: distributed_type DEEPSPEED (deepspeed_config_file, its \"auto\" precision filled from\n" +
			"mixed_precision, or the inline zero_stage/offload_*_device/gradient_accumulation_steps/gradient_clipping\n" +
			"keys), FSDP (fsdp_config), MULTI_GPU/MULTI_CPU/NO (ZeRO stage 0); num_processes, num_machines,\n" +
			"machine_rank, main_process_ip/port and gpu_ids become the gotrain launch flags printed.\n" +
			"FSDP: FULL_SHARD → ZeRO-3, SHARD_GRAD_OP → 2, NO_SHARD → 0, HYBRID_SHARD is refused; offload_params →\n" +
			"both offloads; activation_checkpointing → activation_checkpointing; mixed precision → bf16/fp16.\n" +
			"Settings without an equivalent (wrap policy, prefetch, state-dict type...) are listed with the reason.\n" +
			"gotrain launch --config_file accelerate.yaml <command> uses an Accelerate config directly.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "-", Usage: "DeepSpeed JSON file to write; - for standard output"},
			&cli.BoolFlag{Name: "force", Usage: "overwrite --output if it exists"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("config import: expected one FILE argument (an Accelerate or FSDP config), got %d", c.NArg())
			}
			im, err := config.ImportFile(c.Args().First())
			if err != nil {
				return fmt.Errorf("config import: %w", err)
			}
			cfgImportReport(c.App.ErrWriter, im)
			out := c.String("output")
			if out == "-" {
				_, err := c.App.Writer.Write(im.DeepSpeed)
				return err
			}
			if err := cfgWriteFile(out, im.DeepSpeed, c.Bool("force")); err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.App.ErrWriter, "wrote %s; check it with: gotrain config explain %s\n", out, out)
			return err
		},
	}
}

// cfgImportReport lists what was mapped and ignored, and the launch flags
// the file's process settings give.
func cfgImportReport(w io.Writer, im *config.Imported) {
	fmt.Fprintf(w, "%s is %s\n", im.File, im.Kind)
	for _, m := range im.Mapped {
		fmt.Fprintf(w, "  mapped:  %s\n", m)
	}
	for _, i := range im.Ignored {
		fmt.Fprintf(w, "  ignored: %s\n", i)
	}
	if flags := importLaunchFlags(im.Launch); len(flags) > 0 {
		fmt.Fprintf(w, "  launch:  gotrain launch %s train --config <this output> ... (or: gotrain launch --config_file %s train ...)\n", strings.Join(flags, " "), im.File)
	}
}

// importLaunchFlags are the gotrain launch flags an Accelerate config's
// process settings stand for.
func importLaunchFlags(l config.ImportLaunch) []string {
	var f []string
	nodes := max(1, l.NumMachines)
	if l.NumProcesses > 0 {
		f = append(f, fmt.Sprintf("--nproc %d", max(1, l.NumProcesses/nodes)))
	}
	if l.NumMachines > 1 {
		f = append(f, fmt.Sprintf("--num_nodes %d", l.NumMachines))
	}
	if l.MainProcessIP != "" {
		f = append(f, "--master_addr "+l.MainProcessIP)
	}
	if l.MainProcessPort > 0 {
		f = append(f, fmt.Sprintf("--master_port %d", l.MainProcessPort))
	}
	if l.Hostfile != "" {
		f = append(f, "--hostfile "+l.Hostfile)
	}
	return f
}
