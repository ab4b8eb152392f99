package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/internal/atomicfile"
	"github.com/gotrain/gotrain/internal/regularfile"
)

// DeepSpeed's and Accelerate's launcher options that gotrain launch takes
// in their own spelling.

// launchCompatFlags are the flags of gotrain launch for Accelerate users.
func launchCompatFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "config_file", Aliases: []string{"config-file"},
			Usage: "an Accelerate config `YAML`: its num_processes, num_machines, main_process_ip/port give --nproc, --num_nodes, --master_addr/port (flags given win), and the DeepSpeed config it maps to is passed to the ranks as --config"},
		&cli.BoolFlag{Name: "no_ssh", Aliases: []string{"no-ssh"},
			Usage: "start only this node's ranks (every node runs the same launch with its own --node_rank), as DeepSpeed's --no_ssh; the nodes come from --hostfile, or are --num_nodes alike nodes of --nproc slots"},
		&cli.StringFlag{Name: "enable_each_rank_log", Aliases: []string{"enable-each-rank-log"},
			Usage: "write every rank's output to `DIR`/rank_<r>.log (rank 0's also stays on the terminal), as DeepSpeed's flag of that name"},
		&cli.IntFlag{Name: "num_processes", Aliases: []string{"num-processes"},
			Usage: "Accelerate's: the ranks of the whole job, all machines together; each of the --num_nodes machines runs num_processes/num_nodes of them (--nproc counts per machine)"},
		&cli.BoolFlag{Name: "bind_cores_to_rank", Aliases: []string{"bind-cores-to-rank"},
			Usage: "bind each rank to its own share of the node's cores (contiguous, near-equal) and size its threads to it (OMP_NUM_THREADS too), as DeepSpeed's flag of that name"},
	}
}

// defaultHostfile is DeepSpeed's hostfile when -H is not given.
const defaultHostfile = "/job/hostfile"

// launchApplyCompat applies --config_file, --num_processes and DeepSpeed's
// defaults to the launch flags, and returns the ranks' arguments with
// --config added when the Accelerate file gives the DeepSpeed config.
func launchApplyCompat(c *cli.Context, args []string) ([]string, error) {
	if !c.IsSet("hostfile") && c.String("world_info") == "" {
		if st, err := os.Stat(defaultHostfile); err == nil && st.Mode().IsRegular() {
			// DeepSpeed's default: a platform that provides /job/hostfile means it.
			if err := c.Set("hostfile", defaultHostfile); err != nil {
				return nil, err
			}
			fmt.Fprintf(c.App.ErrWriter, "gotrain launch: using %s (DeepSpeed's default hostfile)\n", defaultHostfile)
		}
	}
	switch l := strings.ToLower(c.String("launcher")); l {
	case "pdsh":
		return nil, fmt.Errorf("launch: --launcher pdsh: gotrain starts the nodes over ssh itself; use --launcher ssh (the default for a hostfile of several nodes) with the same --hostfile")
	case "openmpi", "mpich", "impi", "mvapich":
		return nil, fmt.Errorf("launch: --launcher %s: no launcher is needed under MPI; run `mpirun -np <ranks> -x MASTER_ADDR=<host> -x MASTER_PORT=%d gotrain %s` and every rank reads its rank from %s's variables",
			l, c.Int("master_port"), strings.Join(args, " "), map[string]string{"openmpi": "Open MPI", "mpich": "PMI", "impi": "PMI", "mvapich": "PMI"}[l])
	}
	if file := c.String("config_file"); file != "" {
		var err error
		if args, err = launchConfigFile(c, file, args); err != nil {
			return nil, err
		}
	}
	return args, launchNumProcesses(c)
}

// launchConfigFile applies an Accelerate config file: its machine and
// process counts and rendezvous address, where the flags leave them, and the
// DeepSpeed config it maps to as the ranks' --config.
func launchConfigFile(c *cli.Context, file string, args []string) ([]string, error) {
	im, err := config.ImportFile(file)
	if err != nil {
		return nil, fmt.Errorf("launch: --config_file: %w", err)
	}
	cfgImportReport(c.App.ErrWriter, im)
	l := im.Launch
	nodes := max(1, l.NumMachines)
	set := func(flag, v string) error {
		if c.IsSet(flag) || v == "" || (flag == "nproc" && c.IsSet("num_processes")) {
			return nil
		}
		return c.Set(flag, v)
	}
	for _, f := range []struct{ flag, v string }{
		{"nproc", positive(l.NumProcesses / nodes)}, {"num_nodes", positive(l.NumMachines * boolInt(l.NumMachines > 1))},
		{"master_addr", l.MainProcessIP}, {"master_port", positive(l.MainProcessPort)}, {"hostfile", l.Hostfile},
	} {
		if err := set(f.flag, f.v); err != nil {
			return nil, fmt.Errorf("launch: --config_file %s: %w", file, err)
		}
	}
	if l.GPUIDs != "" && l.GPUIDs != "all" && os.Getenv("CUDA_VISIBLE_DEVICES") == "" {
		// Accelerate's gpu_ids are the devices this node uses.
		os.Setenv("CUDA_VISIBLE_DEVICES", l.GPUIDs)
	}
	if slices.ContainsFunc(args[1:], func(a string) bool {
		n, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		return strings.HasPrefix(a, "-") && (n == "config" || n == "deepspeed" || n == "deepspeed_config")
	}) {
		fmt.Fprintf(c.App.ErrWriter, "gotrain launch: the command gives its own --config; %s's DeepSpeed settings are not used\n", file)
		return args, nil
	}
	ds := im.DeepSpeedFile
	if ds == "" || !strings.Contains(im.Kind, "deepspeed_config_file") || slices.ContainsFunc(im.Mapped, func(m string) bool { return strings.Contains(m, "(was \"auto\")") }) {
		if ds, err = launchWriteDeepSpeed(c, file, im.DeepSpeed, args); err != nil {
			return nil, err
		}
	}
	return append([]string{args[0], "--config", ds}, args[1:]...), nil
}

// launchDeepSpeedMark starts the first line of every DeepSpeed config
// launch converts: a file of that name without it is the user's.
const launchDeepSpeedMark = "// gotrain launch converted this DeepSpeed config from "

// launchWriteDeepSpeed writes the DeepSpeed config ds that the Accelerate
// file maps to into the run's output directory (the ranks' --output-dir),
// as <name>.deepspeed.json with the run's other artifacts, atomically. It
// replaces only a file it wrote itself, and says where the file went.
func launchWriteDeepSpeed(c *cli.Context, file string, ds []byte, args []string) (string, error) {
	cmd := findCommand(c.App.Commands, args[0])
	if cmd == nil || !hasFlag(cmd, "output-dir") {
		return "", fmt.Errorf("launch: --config_file %s: %s has no --output-dir to write the DeepSpeed config it maps to into; convert it with `gotrain config import %s --output ds.json` and pass --config ds.json to the command",
			file, args[0], file)
	}
	out := rankFlagValue(cmd, args[1:], "output-dir")
	path := filepath.Join(out, strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))+".deepspeed.json")
	old, err := regularfile.Read("the converted DeepSpeed config", path, maxConvertedConfig)
	switch {
	case err == nil && !bytes.HasPrefix(old, []byte(launchDeepSpeedMark)):
		return "", fmt.Errorf("launch: --config_file %s: %s exists and gotrain did not write it, so it is left alone; move it away, or pass --config %s to the command to train with it",
			file, path, path)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("launch: --config_file %s: %w", file, err)
	}
	body := append([]byte(launchDeepSpeedMark+file+"; it is rewritten at every such launch, so edit that file instead\n"), ds...)
	if err := atomicfile.MkdirAll(out); err != nil {
		return "", fmt.Errorf("launch: --config_file %s: %w", file, err)
	}
	if err := atomicfile.WriteFile(path, body); err != nil {
		return "", fmt.Errorf("launch: --config_file %s: write the converted DeepSpeed config: %w", file, err)
	}
	fmt.Fprintf(c.App.ErrWriter, "gotrain launch: wrote %s, the DeepSpeed config %s maps to, into the run's output directory; the ranks get --config %s\n", path, file, path)
	return path, nil
}

// maxConvertedConfig bounds what is read of an existing converted config:
// enough for its first line.
const maxConvertedConfig = 16 << 20

// launchNumProcesses applies Accelerate's --num_processes, the ranks of the
// whole job, as --nproc ranks on each of the --num_nodes machines.
func launchNumProcesses(c *cli.Context) error {
	if !c.IsSet("num_processes") {
		return nil
	}
	total, nodes := c.Int("num_processes"), max(1, c.Int("num_nodes"))
	switch {
	case c.String("hostfile") != "" && !c.IsSet("num_nodes"):
		return fmt.Errorf("launch: --num_processes %d counts the ranks of all machines: give --num_nodes (Accelerate's --num_machines) with the hostfile so gotrain can split them, or --nproc for the ranks per node", total)
	case total < 1 || total%nodes != 0:
		return fmt.Errorf("launch: --num_processes %d: want a positive multiple of the %d machine(s) (it counts the ranks of all machines, as Accelerate's does)", total, nodes)
	case c.IsSet("nproc") && c.Int("nproc") != total/nodes:
		return fmt.Errorf("launch: --num_processes %d over %d machine(s) is %d ranks each, but --nproc says %d; give one of them", total, nodes, total/nodes, c.Int("nproc"))
	}
	return c.Set("nproc", strconv.Itoa(total/nodes))
}

// rankFlagValue is the value args (a command's arguments, without its name)
// give cmd's flag name under any of its names, or the flag's default.
func rankFlagValue(cmd *cli.Command, args []string, name string) string {
	f := lookupFlag(cmd, name)
	for i := 0; i < len(args) && args[i] != "--"; i++ {
		n, v, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") || n == "" {
			continue
		}
		if lookupFlag(cmd, n) == f && f != nil {
			if hasValue {
				return v
			}
			if i+1 < len(args) {
				return args[i+1]
			}
		}
		if !hasValue && takesValue(cmd, n) {
			i++
		}
	}
	if sf, ok := f.(*cli.StringFlag); ok {
		return sf.Value
	}
	return ""
}

func positive(n int) string {
	if n <= 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
