package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/launch"
)

// launchCommand is `gotrain launch`: DeepSpeed's launcher for gotrain
// commands, on this machine, over ssh, or through srun.
func launchCommand() *cli.Command {
	return &cli.Command{
		Name:      "launch",
		Usage:     "run a gotrain command as N ranks (this machine, ssh to a hostfile's nodes, or srun) and supervise them",
		ArgsUsage: "<command> [command flags]",
		Description: "Starts one process per rank, each the same gotrain binary running <command> with RANK, WORLD_SIZE,\n" +
			"LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (plus DeepSpeed's CROSS_RANK, CROSS_SIZE,\n" +
			"LOCAL_SIZE, and CUDA_VISIBLE_DEVICES listing the node's slots). Launch flags come first; everything from\n" +
			"the command name on is passed to the ranks untouched.\n\n" +
			"Resources follow DeepSpeed: without --hostfile, this machine's GPUs (CUDA_VISIBLE_DEVICES, else every\n" +
			"/dev/nvidiaN), or one CPU rank unless --nproc says more. A hostfile has `<host> slots=<n>` lines.\n" +
			"--include/--exclude take NODE_SPEC[@NODE_SPEC...] with NODE_SPEC = NAME[:SLOT[,SLOT...]].\n\n" +
			"Supervision: if any rank exits non-zero or is killed, every other rank gets SIGTERM (SIGKILL after\n" +
			"--grace-period) and launch exits with the status of the rank that failed first (128+signal when\n" +
			"killed), naming it: a rank killed by a signal, else the rank the others report lost or waited for.\n" +
			"Ctrl-C or SIGTERM sends SIGTERM to all ranks so they can save (over ssh: the nodes' sessions are told\n" +
			"through stdin); launch then exits 130 (SIGINT) or 143 (SIGTERM). A second Ctrl-C kills at once.\n" +
			"Rank 0 prints to this terminal; the other ranks' lines go to stderr prefixed with [rank r], or to\n" +
			"--log-dir files. Every rank gets GOTRAIN_JOB_SECRET and GOTRAIN_JOB_ID (random unless already set).\n\n" +
			"No launcher is needed under srun, mpirun or torchrun: `gotrain train` reads its rank from their\n" +
			"variables (SLURM_PROCID..., OMPI_COMM_WORLD_RANK..., PMI_RANK..., RANK...).\n\n" +
			"Examples:\n" +
			"  gotrain launch --nproc 4 train --config ds.json --data 'data/train_*.bin'\n" +
			"  gotrain launch --hostfile hosts --include 'worker-0@worker-1:0,2' train --config ds.json\n" +
			"  gotrain launch --launcher slurm --num_nodes 2 --nproc 8 train --config ds.json",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "nproc", Aliases: []string{"num_gpus", "num-gpus", "nproc_per_node", "nproc-per-node"},
				DefaultText: "all slots; 1 without GPUs or with --launcher slurm",
				Usage:       "ranks per node: the first N slots of every node"},
			&cli.StringFlag{Name: "hostfile", Aliases: []string{"H"},
				DefaultText: "this machine only",
				Usage:       "DeepSpeed hostfile: one '<host> slots=<n>' line per node, in rank order"},
			&cli.IntFlag{Name: "num_nodes", Aliases: []string{"num-nodes"},
				DefaultText: "all; with --launcher slurm the allocation's SLURM_JOB_NUM_NODES, else 1",
				Usage:       "use the first K nodes of the hostfile (with --launcher slurm: srun --nodes)"},
			&cli.StringFlag{Name: "include", Aliases: []string{"i"},
				Usage: "use only these nodes/slots, e.g. 'worker-0@worker-1:0,2' or 'localhost:0,1'"},
			&cli.StringFlag{Name: "exclude", Aliases: []string{"e"},
				Usage: "use everything but these nodes/slots, e.g. 'worker-1:0'"},
			&cli.StringFlag{Name: "master_addr", Aliases: []string{"master-addr"},
				DefaultText: "127.0.0.1 on one machine, the first host of the hostfile with ssh",
				Usage:       "address of rank 0's rendezvous"},
			&cli.IntFlag{Name: "master_port", Aliases: []string{"master-port"}, Value: launch.DefaultMasterPort,
				Usage: "TCP port of rank 0's rendezvous; 0 picks a free port on this machine"},
			&cli.StringFlag{Name: "launcher",
				DefaultText: "local for one node, ssh for several",
				Usage:       "local, ssh or slurm"},
			&cli.StringFlag{Name: "log-dir", Aliases: []string{"log_dir"},
				Usage: "write rank r's output (r > 0) to DIR/rank_<r>.log instead of prefixed lines on stderr"},
			&cli.DurationFlag{Name: "grace-period", Aliases: []string{"grace_period"}, Value: launch.DefaultGracePeriod,
				Usage: "time ranks get between SIGTERM and SIGKILL when the job is stopped"},
			&cli.StringFlag{Name: "remote-binary", Aliases: []string{"remote_binary"},
				DefaultText: "this binary's path",
				Usage:       "gotrain's path on the other nodes (ssh, slurm)"},
			&cli.IntFlag{Name: "ssh_port", Aliases: []string{"ssh-port"},
				DefaultText: "ssh's own",
				Usage:       "ssh port of the nodes"},
			&cli.StringFlag{Name: "launcher_args", Aliases: []string{"launcher-args"},
				Usage: "extra options for ssh or srun, split into words as a shell would (quotes, backslashes; no expansion), e.g. \"-i key -o 'ProxyJump=gw'\""},
			// Set by the ssh launcher on each node; not for people.
			&cli.StringFlag{Name: "world_info", Hidden: true, Usage: "the job's nodes and slots (base64 JSON); runs this node's ranks"},
			&cli.IntFlag{Name: "node_rank", Aliases: []string{"node-rank"}, Value: -1, DefaultText: "none",
				Usage: "this node's index among the job's nodes: with --no_ssh, or with --num_nodes K and no hostfile (torchrun's style: run the same launch on every node with --master_addr set)"},
			&cli.BoolFlag{Name: "stdin-lifeline", Hidden: true, Usage: "stop all ranks when stdin ends (the ssh connection closed)"},
			&cli.BoolFlag{Name: "stdin-job-env", Hidden: true, Usage: "read the job's secret and id from the first line of stdin"},
		},
		Action: withResumeHint(launchAction),
	}
}

func launchAction(c *cli.Context) error {
	args := c.Args().Slice()
	if err := launchCheckSubcommand(c, args); err != nil {
		return err
	}
	args, err := launchApplyCompat(c, args)
	if err != nil {
		return err
	}
	if step, ok := launch.InSrunStep(os.Getenv); ok && c.String("world_info") == "" {
		return launchSrunRefusal(c, step, args)
	}
	nodeFlags, err := launchNodeFlags(c)
	if err != nil {
		return err
	}
	if c.IsSet("nproc") && c.Int("nproc") < 1 {
		return fmt.Errorf("launch: --nproc must be at least 1 (got %d)", c.Int("nproc"))
	}
	if c.IsSet("num_nodes") && c.Int("num_nodes") < 1 {
		return fmt.Errorf("launch: --num_nodes must be at least 1 (got %d)", c.Int("num_nodes"))
	}
	grace := c.Duration("grace-period")
	if grace <= 0 {
		return fmt.Errorf("launch: --grace-period must be positive (got %v)", grace)
	}
	launcherArgs, err := launch.SplitShellWords(c.String("launcher_args"))
	if err != nil {
		return fmt.Errorf("launch: --launcher_args %w; quote it as in a shell, e.g. --launcher_args \"-o 'ProxyCommand=ssh -W %%h:%%p gw'\"", err)
	}
	port := c.Int("master_port")
	if port < 0 || port > 65535 {
		return fmt.Errorf("launch: --master_port %d is not a TCP port (1-65535, or 0 for a free one)", port)
	}
	if port == 0 {
		p, err := launch.FreePort()
		if err != nil {
			return fmt.Errorf("launch: %w", err)
		}
		port = p
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("launch: find gotrain's own path: %w", err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}

	ctx, force, stop := launchSignals(c.Context)
	defer stop()
	stdin := bufio.NewReader(os.Stdin)
	var jobEnv []string
	if c.Bool("stdin-job-env") {
		// Sent by the ssh launcher before anything else on stdin, so that
		// the secret is on no command line.
		if jobEnv, err = launch.ReadStdinEnv(stdin); err != nil {
			return fmt.Errorf("launch: %w", err)
		}
	}
	if c.Bool("stdin-lifeline") {
		ctx = launchLifeline(ctx, stdin)
	}
	opts := launch.SuperviseOptions{GracePeriod: grace, Force: force}

	if wi := c.String("world_info"); wi != "" {
		if jobEnv == nil {
			jobEnv = launch.JobEnv(os.Environ())
		}
		return launchNode(ctx, c, wi, exe, cwd, port, args, jobEnv, opts)
	}
	if c.Bool("no_ssh") || c.IsSet("node_rank") {
		return launchThisNode(ctx, c, exe, cwd, port, args, opts)
	}

	mode := strings.ToLower(c.String("launcher"))
	switch mode {
	case "", "local", "ssh", "slurm":
	default:
		return fmt.Errorf("launch: --launcher %q: choose local, ssh or slurm", c.String("launcher"))
	}
	if mode == "slurm" {
		return launchSlurm(ctx, c, exe, port, args, launcherArgs, opts)
	}

	sel := launch.Selection{Include: c.String("include"), Exclude: c.String("exclude"),
		NumNodes: c.Int("num_nodes"), NumSlots: c.Int("nproc")}
	var avail []launch.Node
	// With a hostfile the slots are GPUs, as DeepSpeed assumes.
	pool := launch.LocalPool{GPU: true}
	if hf := c.String("hostfile"); hf != "" {
		if avail, err = launch.ReadHostfile(hf); err != nil {
			return fmt.Errorf("launch: %w", err)
		}
		sel.Source = "hostfile " + hf
	} else {
		visible, set := os.LookupEnv("CUDA_VISIBLE_DEVICES")
		pool = launch.NewLocalPool(visible, set, launch.CountNvidiaDevices("/dev"), sel.NumSlots)
		avail = []launch.Node{pool.Node}
		sel.Source = pool.Source
	}
	nodes, err := launch.Select(avail, sel)
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	if mode == "" {
		mode = "ssh"
		if len(nodes) == 1 && launchIsThisMachine(nodes[0].Host) {
			mode = "local"
		}
	}

	errw := c.App.ErrWriter
	if mode == "local" {
		if len(nodes) != 1 {
			return fmt.Errorf("launch: --launcher local runs one node, but the selection has %d (%s); use --launcher ssh or narrow it with --num_nodes 1", len(nodes), launchHostList(nodes))
		}
		addr := c.String("master_addr")
		if addr == "" {
			addr = "127.0.0.1"
		}
		if err := launch.CheckMasterAddr(ctx, net.DefaultResolver, addr); err != nil {
			return fmt.Errorf("launch: %w", err)
		}
		job := launch.NodeJob{
			Nodes: nodes, Binary: exe, Args: args, Env: launch.MergeEnv(os.Environ(), launch.JobEnv(os.Environ())),
			MasterAddr: addr, MasterPort: port, CUDAVisible: pool.CUDAVisible(nodes[0]),
			LogDir: c.String("log-dir"), Stdout: c.App.Writer, Stderr: errw,
		}
		if err := launchNodeOptions(c, &job); err != nil {
			return err
		}
		fmt.Fprintf(errw, "gotrain launch: %d rank(s) on %s (slots %s), master %s:%d\n",
			len(nodes[0].Slots), nodes[0].Host, launchInts(nodes[0].Slots), addr, port)
		return launch.RunNode(ctx, launch.ExecRunner{}, job, opts)
	}

	// ssh
	addr := c.String("master_addr")
	if addr == "" {
		// ssh takes a user from "root@worker-0"; the ranks need the host.
		addr = launch.HostOf(nodes[0].Host)
		fmt.Fprintf(errw, "gotrain launch: MASTER_ADDR is the first host, %s; give --master_addr if the nodes reach it by another name\n", addr)
	}
	if err := launch.CheckMasterAddr(ctx, net.DefaultResolver, addr); err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	home, _ := os.UserHomeDir()
	fileEnv, err := launch.ReadEnvFiles(launch.EnvFilePaths(home, cwd))
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	remote := c.String("remote-binary")
	if remote == "" {
		remote = exe
	}
	exported := launch.MergeEnv(launch.ForwardedEnv(os.Environ()), fileEnv)
	cmds, err := launch.BuildSSHCommands(launch.SSHJob{
		Nodes: nodes, RemoteBinary: remote, Dir: cwd,
		// A secret in an env file is the user's, as one exported here is.
		Env: launch.WithoutJobEnv(exported), JobEnv: launch.JobEnv(launch.MergeEnv(os.Environ(), fileEnv)),
		Args: args, MasterAddr: addr, MasterPort: port, GracePeriod: grace,
		LogDir: c.String("log-dir"), SSHPort: c.Int("ssh_port"), SSHArgs: launcherArgs, NodeFlags: nodeFlags,
	})
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	world := 0
	for _, n := range nodes {
		world += len(n.Slots)
	}
	fmt.Fprintf(errw, "gotrain launch: %d ranks on %d nodes over ssh (%s), master %s:%d\n", world, len(nodes), launchHostList(nodes), addr, port)
	// The node launchers get the grace period to stop their ranks after
	// their stdin closes; ssh itself is ended only after that, so that
	// their last messages and exit statuses still arrive.
	opts.GracePeriod = grace + launchSSHMargin
	return launch.RunCommands(ctx, launch.ExecRunner{}, cmds, os.Environ(), c.App.Writer, errw, opts)
}

// launchSSHMargin is how much longer than the node launchers' grace period
// the ssh launcher waits before it ends the ssh clients of a stopping job.
const launchSSHMargin = 5 * time.Second

// launchNode runs this node's share of a job started by an ssh launcher.
func launchNode(ctx context.Context, c *cli.Context, worldInfo, exe, cwd string, port int, args, jobEnv []string, opts launch.SuperviseOptions) error {
	nodes, err := launch.DecodeWorldInfo(worldInfo)
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	addr := c.String("master_addr")
	if addr == "" {
		return fmt.Errorf("launch: --world_info needs --master_addr")
	}
	// The ranks resolve MASTER_ADDR here, not where the job was launched.
	if err := launch.CheckMasterAddr(ctx, net.DefaultResolver, addr); err != nil {
		return fmt.Errorf("launch: node %d: %w", c.Int("node_rank"), err)
	}
	job := launch.NodeJob{
		Nodes: nodes, NodeRank: c.Int("node_rank"), Binary: exe, Args: args, Dir: cwd, Env: launch.MergeEnv(os.Environ(), jobEnv),
		MasterAddr: addr, MasterPort: port, LogDir: c.String("log-dir"), Stdout: c.App.Writer, Stderr: c.App.ErrWriter,
	}
	if err := launchNodeOptions(c, &job); err != nil {
		return err
	}
	return launch.RunNode(ctx, launch.ExecRunner{}, job, opts)
}

// launchSlurm runs the job as one srun step; the ranks read their identity
// from srun's variables.
func launchSlurm(ctx context.Context, c *cli.Context, exe string, port int, args, launcherArgs []string, opts launch.SuperviseOptions) error {
	if c.String("hostfile") != "" {
		return fmt.Errorf("launch: --hostfile does not apply to --launcher slurm (Slurm allocates the nodes); use --include/--exclude host names or --num_nodes")
	}
	nnodes, nproc := c.Int("num_nodes"), c.Int("nproc")
	if nnodes == 0 {
		// Inside an allocation (salloc, sbatch) use all of its nodes.
		nnodes = 1
		if n, err := strconv.Atoi(os.Getenv("SLURM_JOB_NUM_NODES")); err == nil && n > 0 {
			nnodes = n
		}
	}
	if nproc == 0 {
		nproc = 1
	}
	binary := c.String("remote-binary")
	if binary == "" {
		binary = exe
	}
	argv, err := launch.BuildSrunCommand(launch.SrunJob{
		NumNodes: nnodes, TasksPerNode: nproc, Include: c.String("include"), Exclude: c.String("exclude"),
		Binary: binary, Args: args, ExtraArgs: launcherArgs,
	})
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	// srun passes its environment on to every task: the job's secret
	// travels there, not on srun's command line.
	over := append([]string{"MASTER_PORT=" + strconv.Itoa(port)}, launch.JobEnv(os.Environ())...)
	if a := c.String("master_addr"); a != "" {
		// The first node of the allocation may be one this machine cannot
		// name, so only an address given here is checked.
		if err := launch.CheckMasterAddr(ctx, net.DefaultResolver, a); err != nil {
			return fmt.Errorf("launch: %w", err)
		}
		over = append(over, "MASTER_ADDR="+a)
	}
	fmt.Fprintf(c.App.ErrWriter, "gotrain launch: %s\n", launch.ShellJoin(argv))
	cmds := []launch.Command{{Label: "srun", Argv: argv}}
	return launch.RunCommands(ctx, launch.ExecRunner{}, cmds, launch.MergeEnv(os.Environ(), over), c.App.Writer, c.App.ErrWriter, opts)
}

// launchCheckSubcommand insists on a gotrain command name before the ranks'
// flags, so that launch never parses flags meant for them.
func launchCheckSubcommand(c *cli.Context, args []string) error {
	var names []string
	for _, cmd := range c.App.Commands {
		if cmd.Name != "launch" && cmd.Name != "help" && !cmd.Hidden {
			names = append(names, cmd.Name)
		}
	}
	usage := "usage: gotrain launch [launch flags] <command> [command flags], e.g. gotrain launch --nproc 2 train --config ds.json"
	switch {
	case len(args) == 0:
		return fmt.Errorf("launch: no command to run; %s", usage)
	case strings.HasPrefix(args[0], "-"):
		return fmt.Errorf("launch: %q is not a gotrain command; launch flags go before the command name (one of %s); %s", args[0], strings.Join(names, ", "), usage)
	case args[0] == "launch":
		return fmt.Errorf("launch: ranks cannot run launch itself; %s", usage)
	case c.App.Command(args[0]) == nil:
		return fmt.Errorf("launch: unknown command %q; commands: %s", args[0], strings.Join(names, ", "))
	}
	return nil
}

// launchSignals returns a context that ends on Ctrl-C, SIGTERM or SIGHUP
// (the terminal went away), and a channel that closes on a second such
// signal, to kill the ranks without waiting for the grace period. A second
// signal within a second of the first does not count: tools like timeout
// deliver one request twice, to the process and to its group.
func launchSignals(parent context.Context) (context.Context, <-chan struct{}, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	force := make(chan struct{})
	done := make(chan struct{})
	go func() {
		var first time.Time
		for {
			select {
			case s := <-ch:
				switch {
				case first.IsZero():
					first = time.Now()
					sig, _ := s.(syscall.Signal)
					cancel(launch.SignalCause{Signal: sig})
				case time.Since(first) > time.Second:
					close(force)
					return
				}
			case <-done:
				return
			}
		}
	}()
	return ctx, force, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

// launchLifeline ends ctx when r (stdin) reaches its end: on a node started
// over ssh, that is the launcher stopping the job, or the connection to it
// closing.
func launchLifeline(parent context.Context, r io.Reader) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	go func() {
		_, _ = io.Copy(io.Discard, r)
		cancel(errors.New("the connection to the launcher closed"))
	}()
	return ctx
}

// launchIsThisMachine reports whether host names the machine launch runs on.
func launchIsThisMachine(host string) bool {
	switch host {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	name, err := os.Hostname()
	if err != nil {
		return false
	}
	short, _, _ := strings.Cut(name, ".")
	return host == name || host == short
}

func launchHostList(nodes []launch.Node) string {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Host
	}
	return strings.Join(names, ", ")
}

func launchInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// slurmCommand is `gotrain slurm`: Slurm helpers.
func slurmCommand() *cli.Command {
	return &cli.Command{
		Name:        "slurm",
		Usage:       "Slurm helpers: write an sbatch script for a training run",
		Subcommands: []*cli.Command{launchSlurmGenerateCommand()},
	}
}

func launchSlurmGenerateCommand() *cli.Command {
	return &cli.Command{
		Name:      "generate",
		Usage:     "write an sbatch script that trains with one rank per GPU on K nodes",
		ArgsUsage: "-- [gotrain train flags]",
		Description: "The script has the #SBATCH headers, NCCL settings to uncomment, MASTER_ADDR from the first host of\n" +
			"the allocation (scontrol show hostnames) and MASTER_PORT, each unless set at submission, the job's\n" +
			"GOTRAIN_JOB_SECRET and GOTRAIN_JOB_ID (drawn once from /dev/urandom unless set), and\n" +
			"`srun --kill-on-bad-exit=1 <this gotrain's absolute path> train ...`. Inside srun every task finds its\n" +
			"rank in SLURM_* variables, so no launcher runs in the job.\n\n" +
			"Example:\n" +
			"  gotrain slurm generate --nodes 2 --gpus-per-node 8 --time 48:00:00 --partition gpu \\\n" +
			"    --output train.sbatch -- --config ds_zero3.json --model gpt2 --data 'data/train_*.bin'\n" +
			"  sbatch train.sbatch",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "nodes", Usage: "number of nodes (#SBATCH --nodes)", Required: true, DefaultText: "required"},
			&cli.IntFlag{Name: "gpus-per-node", Aliases: []string{"gpus_per_node"}, DefaultText: "none", Usage: "GPUs per node (--gres=gpu:N); one rank per GPU"},
			&cli.IntFlag{Name: "ntasks-per-node", Aliases: []string{"ntasks_per_node"}, DefaultText: "--gpus-per-node", Usage: "ranks per node (give it for CPU nodes)"},
			&cli.StringFlag{Name: "job-name", Aliases: []string{"job_name"}, Value: "gotrain", Usage: "job name (#SBATCH --job-name)"},
			&cli.StringFlag{Name: "time", Usage: "time limit, e.g. 48:00:00 (#SBATCH --time)"},
			&cli.StringFlag{Name: "partition", Usage: "partition (#SBATCH --partition)"},
			&cli.IntFlag{Name: "cpus-per-task", Aliases: []string{"cpus_per_task"}, DefaultText: "Slurm's", Usage: "CPU cores per rank (#SBATCH --cpus-per-task)"},
			&cli.StringFlag{Name: "mem-per-gpu", Aliases: []string{"mem_per_gpu"}, Usage: "host memory per GPU, e.g. 32G (#SBATCH --mem-per-gpu)"},
			&cli.IntFlag{Name: "master-port", Aliases: []string{"master_port"}, Value: launch.DefaultMasterPort, Usage: "rendezvous port (MASTER_PORT, unless set when submitting)"},
			&cli.StringFlag{Name: "binary", DefaultText: "this gotrain's absolute path", Usage: "gotrain's path on the nodes"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "-", Usage: "script file to write; - for stdout"},
			&cli.BoolFlag{Name: "force", Usage: "overwrite --output if it exists"},
			&cli.StringFlag{Name: "container-image", Aliases: []string{"container_image"}, Usage: "Pyxis/Enroot: run every rank in this image (e.g. ./gotrain.sqsh from enroot import); gotrain is then the image's, unless --binary"},
			&cli.StringFlag{Name: "container-mounts", Aliases: []string{"container_mounts"}, Usage: "Pyxis: SRC:DST[,SRC:DST...] mounted into the container, e.g. /fsx:/fsx"},
			&cli.StringFlag{Name: "container-workdir", Aliases: []string{"container_workdir"}, Usage: "Pyxis: working directory inside the container"},
			&cli.BoolFlag{Name: "container-writable-tmpfs", Aliases: []string{"container_writable_tmpfs"}, Usage: "Pyxis: a writable tmpfs over the read-only image (lost when the job ends; write outputs to a mount)"},
		},
		Action: func(c *cli.Context) error {
			args := c.Args().Slice()
			// `-- train --config x` and `-- --config x` mean the same.
			if len(args) > 0 && args[0] == "train" {
				args = args[1:]
			}
			binary := c.String("binary")
			if binary == "" && c.String("container-image") != "" {
				binary = "gotrain" // the image's, on its PATH (the Dockerfile puts it in /usr/local/bin)
			}
			if binary == "" {
				// As launch does: the nodes usually share this file system,
				// and a batch job's PATH need not include gotrain.
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("slurm generate: find gotrain's own path (give --binary): %w", err)
				}
				if binary, err = filepath.Abs(exe); err != nil {
					return fmt.Errorf("slurm generate: %w", err)
				}
			}
			script, err := launch.GenerateSbatch(launch.SbatchSpec{
				JobName: c.String("job-name"), Nodes: c.Int("nodes"), GPUsPerNode: c.Int("gpus-per-node"),
				TasksPerNode: c.Int("ntasks-per-node"), CPUsPerTask: c.Int("cpus-per-task"), MemPerGPU: c.String("mem-per-gpu"),
				Time: c.String("time"), Partition: c.String("partition"), MasterPort: c.Int("master-port"),
				Binary: binary, TrainArgs: args,
				ContainerImage: c.String("container-image"), ContainerMounts: c.String("container-mounts"),
				ContainerWorkdir: c.String("container-workdir"), ContainerWritableTmpfs: c.Bool("container-writable-tmpfs"),
			})
			if err != nil {
				return err
			}
			out := c.String("output")
			if out == "-" {
				_, err := io.WriteString(c.App.Writer, script)
				return err
			}
			if err := launchWriteScript(out, script, c.Bool("force")); err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.App.ErrWriter, "wrote %s; submit it with: sbatch %s\n", out, out)
			return err
		},
	}
}

// launchWriteScript writes an executable script, refusing to replace an
// existing file unless force is set.
func launchWriteScript(path, script string, force bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o755)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("slurm generate: %s exists; pass --force to overwrite it or choose another --output", path)
	}
	if err != nil {
		return fmt.Errorf("slurm generate: %w", err)
	}
	if _, err := io.WriteString(f, script); err != nil {
		f.Close()
		return fmt.Errorf("slurm generate: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("slurm generate: write %s: %w", path, err)
	}
	return nil
}
