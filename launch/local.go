package launch

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// NodeJob is the share of a job that runs on one machine: the ranks that
// Place assigns to Nodes[NodeRank], each a child process of Binary.
type NodeJob struct {
	Nodes    []Node // the whole selection, in rank order
	NodeRank int    // which of Nodes is this machine
	Binary   string // usually os.Executable(): the same gotrain
	Args     []string
	Dir      string   // working directory of the ranks; "" for the launcher's
	Env      []string // base environment (os.Environ()); rank variables override it
	// MasterAddr and MasterPort are where rank 0 serves the rendezvous.
	MasterAddr string
	MasterPort int
	// CUDAVisible is CUDA_VISIBLE_DEVICES for the ranks: "" sets it to the
	// node's slots, "-" leaves the inherited value alone.
	CUDAVisible string
	// LogDir, when set, receives rank_<r>.log for every rank but 0; without
	// it those ranks' lines go to Stderr prefixed with "[rank r] ".
	// LogRank0 adds rank_0.log, a copy of what rank 0 prints (DeepSpeed's
	// --enable_each_rank_log).
	LogDir   string
	LogRank0 bool
	// Cores, when set, are split among this node's ranks (SplitCores) and
	// each rank is bound to its share (--bind_cores_to_rank).
	Cores []int
	// Stdout and Stderr are the launcher's; rank 0 writes to a terminal
	// directly, so that it stays one, and to anything else through a pipe.
	Stdout, Stderr io.Writer
}

// RunNode starts this node's ranks through r and supervises them (see
// Supervise). Its messages go to j.Stderr.
func RunNode(ctx context.Context, r Runner, j NodeJob, opts SuperviseOptions) error {
	if j.NodeRank < 0 || j.NodeRank >= len(j.Nodes) {
		return fmt.Errorf("node rank %d is outside the %d nodes of the job", j.NodeRank, len(j.Nodes))
	}
	if j.MasterAddr == "" || j.MasterPort < 1 || j.MasterPort > 65535 {
		return fmt.Errorf("master address %q port %d: need a host and a TCP port 1-65535", j.MasterAddr, j.MasterPort)
	}
	stdout, stderr := j.Stdout, j.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	shared := NewSharedOutput(stderr)
	if opts.Log == nil {
		opts.Log = shared
	}
	if j.LogDir != "" {
		if err := os.MkdirAll(j.LogDir, 0o755); err != nil {
			return fmt.Errorf("create log dir: %w", err)
		}
	}

	var procs []Proc
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	node := j.Nodes[j.NodeRank]
	var shares [][]int
	if len(j.Cores) > 0 {
		var err error
		if shares, err = SplitCores(j.Cores, len(node.Slots)); err != nil {
			return err
		}
	}
	for _, p := range Place(j.Nodes) {
		if p.NodeRank != j.NodeRank {
			continue
		}
		env := RankEnv(p, node.Slots, j.MasterAddr, j.MasterPort, j.CUDAVisible)
		var cpus []int
		if shares != nil {
			cpus = shares[p.LocalRank]
			env = append(env, coreEnv(cpus)...)
		}
		proc := Proc{
			Label: "rank " + strconv.Itoa(p.Rank),
			Path:  j.Binary,
			Args:  j.Args,
			Env:   MergeEnv(j.Env, env),
			Dir:   j.Dir,
			Ranks: []int{p.Rank},
			CPUs:  cpus,
		}
		switch {
		case p.Rank == 0:
			proc.Stdout, proc.Stderr = stdout, stderr
			if !isTerminal(stdout) {
				// Rank 0 writes straight to a terminal, which stays one; to
				// anything else through a pipe this launcher drains, so that
				// a closed destination (an ssh session that ended, `| head`)
				// is the launcher's write error, not the rank's.
				proc.Stdout = &dropWriter{w: stdout}
			}
			if j.LogDir != "" && j.LogRank0 {
				f, err := os.OpenFile(filepath.Join(j.LogDir, "rank_0.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
				if err != nil {
					return fmt.Errorf("open log of rank 0: %w", err)
				}
				files = append(files, f)
				// The terminal keeps rank 0's lines; the file gets a copy.
				proc.Stdout = io.MultiWriter(&dropWriter{w: stdout}, f)
				proc.Stderr = io.MultiWriter(&dropWriter{w: stderr}, f)
			}
		case j.LogDir != "":
			path := filepath.Join(j.LogDir, fmt.Sprintf("rank_%d.log", p.Rank))
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
			if err != nil {
				return fmt.Errorf("open log of rank %d: %w", p.Rank, err)
			}
			files = append(files, f)
			proc.Stdout, proc.Stderr = f, f
		default:
			w := shared.Prefixed(fmt.Sprintf("[rank %d] ", p.Rank))
			proc.Stdout, proc.Stderr = w, w
		}
		procs = append(procs, proc)
	}
	return Supervise(ctx, r, procs, opts)
}
