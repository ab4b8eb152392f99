package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/launch"
)

// DeepSpeed's launcher options for jobs whose nodes are started by
// something other than gotrain's ssh launcher: --no_ssh and --node_rank
// (every node runs the same launch with its own index), and the per-node
// options that travel to node launchers: --enable_each_rank_log and
// --bind_cores_to_rank. Also the refusal of `srun gotrain launch`.

// launchNodeFlags checks the per-node options and returns them as flags
// for the node launchers of an ssh job.
func launchNodeFlags(c *cli.Context) ([]string, error) {
	var f []string
	if d := c.String("enable_each_rank_log"); d != "" {
		if l := c.String("log-dir"); l != "" && l != d {
			return nil, fmt.Errorf("launch: --log-dir %s and --enable_each_rank_log %s name different directories; give one", l, d)
		}
		f = append(f, "--enable_each_rank_log", d)
	}
	if c.Bool("bind_cores_to_rank") {
		f = append(f, "--bind_cores_to_rank")
	}
	return f, nil
}

// launchNodeOptions applies the per-node options to this node's job.
func launchNodeOptions(c *cli.Context, job *launch.NodeJob) error {
	if d := c.String("enable_each_rank_log"); d != "" {
		job.LogDir, job.LogRank0 = d, true
	}
	if c.Bool("bind_cores_to_rank") {
		cpus, err := launch.AllowedCPUs()
		if err != nil {
			return fmt.Errorf("launch: --bind_cores_to_rank: %w", err)
		}
		job.Cores = cpus
	}
	return nil
}

// launchThisNode runs this node's ranks of a job whose other nodes run the
// same command with their own --node_rank (--no_ssh, or torchrun's
// --nnodes/--node_rank style without a hostfile).
func launchThisNode(ctx context.Context, c *cli.Context, exe, cwd string, port int, args []string, opts launch.SuperviseOptions) error {
	rank := c.Int("node_rank")
	if rank < 0 {
		return fmt.Errorf("launch: --no_ssh needs --node_rank N, this node's index (0 on the node at --master_addr); run the same launch on every node with its own N")
	}
	sel := launch.Selection{Include: c.String("include"), Exclude: c.String("exclude"), NumNodes: c.Int("num_nodes"), NumSlots: c.Int("nproc")}
	var nodes []launch.Node
	pool := launch.LocalPool{GPU: true}
	if hf := c.String("hostfile"); hf != "" {
		avail, err := launch.ReadHostfile(hf)
		if err != nil {
			return fmt.Errorf("launch: %w", err)
		}
		sel.Source = "hostfile " + hf
		if nodes, err = launch.Select(avail, sel); err != nil {
			return fmt.Errorf("launch: %w", err)
		}
	} else {
		// Without a hostfile the nodes are alike: this machine's slots,
		// --num_nodes times, as torchrun's --nnodes assumes.
		visible, set := os.LookupEnv("CUDA_VISIBLE_DEVICES")
		pool = launch.NewLocalPool(visible, set, launch.CountNvidiaDevices("/dev"), sel.NumSlots)
		local, err := launch.Select([]launch.Node{pool.Node}, launch.Selection{Include: sel.Include, Exclude: sel.Exclude, NumSlots: sel.NumSlots, Source: pool.Source})
		if err != nil {
			return fmt.Errorf("launch: %w", err)
		}
		for i := range max(1, sel.NumNodes) {
			nodes = append(nodes, launch.Node{Host: "node-" + strconv.Itoa(i), Slots: local[0].Slots})
		}
	}
	if rank >= len(nodes) {
		return fmt.Errorf("launch: --node_rank %d, but the job has %d node(s) (0 to %d); check --num_nodes or the hostfile", rank, len(nodes), len(nodes)-1)
	}
	addr := c.String("master_addr")
	if addr == "" {
		if len(nodes) > 1 {
			return fmt.Errorf("launch: --node_rank with %d nodes needs --master_addr, the address of node 0 as every node reaches it", len(nodes))
		}
		addr = "127.0.0.1"
	}
	if err := launch.CheckMasterAddr(ctx, net.DefaultResolver, addr); err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	if len(nodes) > 1 && c.Int("master_port") == 0 {
		return fmt.Errorf("launch: --master_port 0 picks a port on one machine only; give every node the same port, e.g. --master_port %d", launch.DefaultMasterPort)
	}
	env := os.Environ()
	if len(nodes) > 1 && os.Getenv(launch.JobSecretEnv) == "" && os.Getenv("SLURM_JOB_ID") == "" {
		// Separate launchers cannot agree on a random secret.
		return fmt.Errorf("launch: nodes started separately must share the job's secret: export %s=$(openssl rand -hex 32) with the same value on every node before launch", launch.JobSecretEnv)
	}
	if len(nodes) == 1 {
		env = launch.MergeEnv(env, launch.JobEnv(env))
	}
	// Several nodes keep the environment's: a job id drawn here would
	// differ from the other nodes', so without GOTRAIN_JOB_ID the ranks
	// take the one they all derive (SLURM_JOB_ID, or the master port).
	job := launch.NodeJob{
		Nodes: nodes, NodeRank: rank, Binary: exe, Args: args, Dir: cwd, Env: env,
		MasterAddr: addr, MasterPort: port, CUDAVisible: pool.CUDAVisible(nodes[rank]),
		LogDir: c.String("log-dir"), Stdout: c.App.Writer, Stderr: c.App.ErrWriter,
	}
	if err := launchNodeOptions(c, &job); err != nil {
		return err
	}
	world := 0
	for _, n := range nodes {
		world += len(n.Slots)
	}
	fmt.Fprintf(c.App.ErrWriter, "gotrain launch: node %d of %d: %d of %d ranks, master %s:%d\n", rank, len(nodes), len(nodes[rank].Slots), world, addr, port)
	return launch.RunNode(ctx, launch.ExecRunner{}, job, opts)
}

// launchSrunRefusal explains why `srun gotrain launch` is refused, with the
// command that does what was meant.
func launchSrunRefusal(c *cli.Context, step launch.SrunStep, args []string) error {
	per := c.Int("nproc")
	perText := strconv.Itoa(per)
	if per < 1 {
		perText = "<ranks per node>"
	}
	return fmt.Errorf("launch: started by srun as task %d of %d on %d node(s): each task would start a job of its own. "+
		"Let srun start the ranks, which read their rank from Slurm: `srun --nodes=%d --ntasks-per-node=%s gotrain %s`; "+
		"or run `gotrain launch --launcher slurm --num_nodes %d --nproc %s %s` in the batch script itself, not under srun",
		step.Task, step.Tasks, step.Nodes, step.Nodes, perText, launch.ShellJoin(args), step.Nodes, perText, launch.ShellJoin(args))
}
