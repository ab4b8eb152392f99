package launch

import (
	"fmt"
	"strconv"
	"strings"
)

// SrunJob is what BuildSrunCommand needs.
type SrunJob struct {
	NumNodes     int // --nodes
	TasksPerNode int // --ntasks-per-node: one rank per task
	// Include and Exclude are --include/--exclude host specs; slot lists are
	// refused because Slurm, not gotrain, places tasks on devices.
	Include, Exclude string
	Binary           string   // gotrain's path on the nodes
	Args             []string // the gotrain subcommand and its flags
	ExtraArgs        []string // more srun options, before the binary
}

// BuildSrunCommand returns
//
//	srun --nodes=K --ntasks-per-node=N --kill-on-bad-exit=1 [--nodelist=...|--exclude=...] EXTRA... BINARY ARGS...
//
// Each task then finds its rank in srun's SLURM_* variables (DetectRank);
// --kill-on-bad-exit=1 makes Slurm stop the whole step when one rank fails.
func BuildSrunCommand(j SrunJob) ([]string, error) {
	if j.NumNodes < 1 || j.TasksPerNode < 1 {
		return nil, fmt.Errorf("srun launcher: need at least 1 node and 1 task per node (got --num_nodes %d, --nproc %d)", j.NumNodes, j.TasksPerNode)
	}
	if j.Binary == "" || len(j.Args) == 0 {
		return nil, fmt.Errorf("srun launcher: no binary or gotrain subcommand to run")
	}
	if j.Include != "" && j.Exclude != "" {
		return nil, fmt.Errorf("--include and --exclude are mutually exclusive; use one of them")
	}
	argv := []string{"srun",
		"--nodes=" + strconv.Itoa(j.NumNodes),
		"--ntasks-per-node=" + strconv.Itoa(j.TasksPerNode),
		"--kill-on-bad-exit=1"}
	for _, f := range []struct{ spec, flag, srunFlag string }{
		{j.Include, "--include", "--nodelist="},
		{j.Exclude, "--exclude", "--exclude="},
	} {
		if f.spec == "" {
			continue
		}
		specs, err := parseNodeSpecs(f.spec, f.flag)
		if err != nil {
			return nil, err
		}
		hosts := make([]string, len(specs))
		for i, s := range specs {
			if s.Slots != nil {
				return nil, fmt.Errorf("%s %q: slot lists do not apply to --launcher slurm (Slurm assigns devices); list hosts only", f.flag, f.spec)
			}
			hosts[i] = s.Host
		}
		argv = append(argv, f.srunFlag+strings.Join(hosts, ","))
	}
	argv = append(argv, j.ExtraArgs...)
	argv = append(argv, j.Binary)
	return append(argv, j.Args...), nil
}

// SrunStep describes the srun step this process is a task of.
type SrunStep struct {
	Task, Tasks, Nodes int
}

// InSrunStep reports whether env is that of a task of an srun step with
// more than one task or node: a launcher started there runs once per task,
// each starting a whole job of its own, which is never what was meant.
// sbatch's batch shell (no SLURM_STEP_ID) and a one-task srun are not.
func InSrunStep(env func(string) string) (SrunStep, bool) {
	if env("SLURM_PROCID") == "" || (env("SLURM_STEP_ID") == "" && env("SLURM_STEPID") == "") {
		return SrunStep{}, false
	}
	num := func(names ...string) int {
		for _, n := range names {
			if v, err := strconv.Atoi(env(n)); err == nil && v > 0 {
				return v
			}
		}
		return 1
	}
	s := SrunStep{Tasks: num("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"), Nodes: num("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES")}
	s.Task, _ = strconv.Atoi(env("SLURM_PROCID"))
	return s, s.Tasks > 1 || s.Nodes > 1
}
