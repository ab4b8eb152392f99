package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/config"
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
		&cli.BoolFlag{Name: "bind_cores_to_rank", Aliases: []string{"bind-cores-to-rank"},
			Usage: "bind each rank to its own share of the node's cores (contiguous, near-equal) and size its threads to it (OMP_NUM_THREADS too), as DeepSpeed's flag of that name"},
	}
}

// defaultHostfile is DeepSpeed's hostfile when -H is not given.
const defaultHostfile = "/job/hostfile"

// launchApplyCompat applies --config_file and DeepSpeed's defaults to the
// launch flags, and returns the ranks' arguments with --config added.
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
	file := c.String("config_file")
	if file == "" {
		return args, nil
	}
	im, err := config.ImportFile(file)
	if err != nil {
		return nil, fmt.Errorf("launch: --config_file: %w", err)
	}
	cfgImportReport(c.App.ErrWriter, im)
	l := im.Launch
	nodes := max(1, l.NumMachines)
	set := func(flag, v string) error {
		if c.IsSet(flag) || v == "" {
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
		ds = strings.TrimSuffix(file, filepath.Ext(file)) + ".deepspeed.json"
		if err := os.WriteFile(ds, im.DeepSpeed, 0o644); err != nil {
			return nil, fmt.Errorf("launch: --config_file: write the converted DeepSpeed config: %w", err)
		}
		fmt.Fprintf(c.App.ErrWriter, "gotrain launch: wrote %s, the DeepSpeed config %s maps to\n", ds, file)
	}
	return append([]string{args[0], "--config", ds}, args[1:]...), nil
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
