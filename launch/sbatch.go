package launch

import (
	"fmt"
	"strings"
)

// SbatchSpec describes the Slurm batch script GenerateSbatch writes.
type SbatchSpec struct {
	JobName      string // --job-name; "gotrain" when empty
	Nodes        int    // --nodes
	GPUsPerNode  int    // --gres=gpu:N; 0 for CPU-only nodes
	TasksPerNode int    // --ntasks-per-node; GPUsPerNode when 0 (one rank per GPU)
	CPUsPerTask  int    // --cpus-per-task; left out when 0
	MemPerGPU    string // --mem-per-gpu, e.g. "32G"; left out when empty
	Time         string // --time, e.g. "48:00:00"; left out when empty
	Partition    string // --partition; left out when empty
	MasterPort   int    // DefaultMasterPort when 0
	Binary       string // gotrain's path on the nodes (slurm generate: its own absolute path; in a container: gotrain)
	TrainArgs    []string
	// Pyxis/Enroot: srun runs every task in ContainerImage (a .sqsh file
	// or a registry image) with ContainerMounts (SRC:DST[,...]) and
	// ContainerWorkdir, and with a writable tmpfs over the image's root
	// when ContainerWritableTmpfs. Empty fields are left out.
	ContainerImage, ContainerMounts, ContainerWorkdir string
	ContainerWritableTmpfs                            bool
}

// GenerateSbatch returns an sbatch script in the shape of the Slurm scripts
// DeepSpeed users have: #SBATCH headers, NCCL settings to uncomment,
// MASTER_ADDR from the first host of the allocation and MASTER_PORT (each
// unless set when submitting), the job's secret and id (GOTRAIN_JOB_SECRET
// and GOTRAIN_JOB_ID, drawn once from /dev/urandom unless set), then
//
//	srun --kill-on-bad-exit=1 [--container-image=... (Pyxis)] BINARY train ARGS...
//
// with one task per GPU. No launcher runs inside srun: every task finds its
// rank in srun's variables, and srun passes the batch script's exported
// variables to every task.
func GenerateSbatch(s SbatchSpec) (string, error) {
	if s.JobName == "" {
		s.JobName = "gotrain"
	}
	if s.MasterPort == 0 {
		s.MasterPort = DefaultMasterPort
	}
	if s.TasksPerNode == 0 {
		s.TasksPerNode = s.GPUsPerNode
	}
	switch {
	case s.Nodes < 1:
		return "", fmt.Errorf("slurm script: --nodes must be at least 1 (got %d)", s.Nodes)
	case s.GPUsPerNode < 0 || s.CPUsPerTask < 0:
		return "", fmt.Errorf("slurm script: --gpus-per-node and --cpus-per-task cannot be negative")
	case s.TasksPerNode < 1:
		return "", fmt.Errorf("slurm script: no tasks per node; give --gpus-per-node N (one rank per GPU) or, for CPU nodes, --ntasks-per-node N")
	case s.MasterPort < 1 || s.MasterPort > 65535:
		return "", fmt.Errorf("slurm script: --master_port %d is not a TCP port (1-65535)", s.MasterPort)
	case s.Binary == "":
		return "", fmt.Errorf("slurm script: no gotrain binary; give --binary with its path on the nodes")
	case s.ContainerImage == "" && (s.ContainerMounts != "" || s.ContainerWorkdir != "" || s.ContainerWritableTmpfs):
		return "", fmt.Errorf("slurm script: --container-mounts, --container-workdir and --container-writable-tmpfs apply to a container; give --container-image too")
	}
	for _, f := range []struct{ name, v string }{
		{"--job-name", s.JobName}, {"--mem-per-gpu", s.MemPerGPU}, {"--time", s.Time}, {"--partition", s.Partition},
	} {
		if strings.ContainsAny(f.v, " \t\r\n#'\"\\$`") {
			return "", fmt.Errorf("slurm script: %s %q contains spaces, quotes or shell characters that an #SBATCH line cannot hold", f.name, f.v)
		}
	}

	var b strings.Builder
	b.WriteString("#!/bin/bash\n")
	fmt.Fprintf(&b, "#SBATCH --job-name=%s\n", s.JobName)
	fmt.Fprintf(&b, "#SBATCH --nodes=%d\n", s.Nodes)
	fmt.Fprintf(&b, "#SBATCH --ntasks-per-node=%d\n", s.TasksPerNode)
	if s.GPUsPerNode > 0 {
		fmt.Fprintf(&b, "#SBATCH --gres=gpu:%d\n", s.GPUsPerNode)
	}
	if s.CPUsPerTask > 0 {
		fmt.Fprintf(&b, "#SBATCH --cpus-per-task=%d\n", s.CPUsPerTask)
	}
	if s.MemPerGPU != "" {
		fmt.Fprintf(&b, "#SBATCH --mem-per-gpu=%s\n", s.MemPerGPU)
	}
	if s.Time != "" {
		fmt.Fprintf(&b, "#SBATCH --time=%s\n", s.Time)
	}
	if s.Partition != "" {
		fmt.Fprintf(&b, "#SBATCH --partition=%s\n", s.Partition)
	}
	b.WriteString("#SBATCH --output=%x-%j.out\n")
	b.WriteString("#SBATCH --error=%x-%j.out\n")
	b.WriteString(`
# Written by gotrain slurm generate. Submit with: sbatch <this file>
# srun starts one gotrain process per task (one per GPU); each finds its rank,
# local rank and world size in srun's SLURM_* variables, so no launcher runs
# inside the job.

set -eu

# NCCL settings you may need on your network; uncomment to use.
# export NCCL_DEBUG=INFO
# export NCCL_IB_DISABLE=1
# export NCCL_SOCKET_IFNAME=^lo,docker0

# Rank 0 runs on the first node of the allocation and serves the rendezvous;
# a MASTER_ADDR or MASTER_PORT set when submitting (sbatch --export) wins.
if [ -z "${MASTER_ADDR:-}" ]; then
  MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
fi
export MASTER_ADDR
`)
	fmt.Fprintf(&b, "export MASTER_PORT=${MASTER_PORT:-%d}\n", s.MasterPort)
	b.WriteString(`
# The job's secret: every rank proves it with it before the rendezvous lets
# it in. Drawn once here, so srun hands the same value to every task; it is
# in the environment, which only you can read, never on a command line.
if [ -z "${GOTRAIN_JOB_SECRET:-}" ]; then
  GOTRAIN_JOB_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
fi
if [ -z "${GOTRAIN_JOB_ID:-}" ]; then
  GOTRAIN_JOB_ID=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
fi
export GOTRAIN_JOB_SECRET GOTRAIN_JOB_ID
`)
	b.WriteString("\n# --kill-on-bad-exit=1: when one rank fails, Slurm stops all the others.\n")
	cmd := []string{"srun", "--kill-on-bad-exit=1"}
	if s.ContainerImage != "" {
		b.WriteString("# Pyxis runs every task in the container; the variables above reach it.\n")
		cmd = append(cmd, "--container-image="+s.ContainerImage)
		if s.ContainerMounts != "" {
			cmd = append(cmd, "--container-mounts="+s.ContainerMounts)
		}
		if s.ContainerWorkdir != "" {
			cmd = append(cmd, "--container-workdir="+s.ContainerWorkdir)
		}
		if s.ContainerWritableTmpfs {
			cmd = append(cmd, "--container-writable-tmpfs")
		}
	}
	cmd = append(append(cmd, s.Binary, "train"), s.TrainArgs...)
	b.WriteString(ShellJoin(cmd) + "\n")
	return b.String(), nil
}
