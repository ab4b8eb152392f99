package launch

import (
	"fmt"
	"strconv"
	"strings"
)

// Source names the launcher a rank's identity was read from.
type Source string

const (
	SourceNone    Source = ""        // no launcher: a single process
	SourceEnv     Source = "env"     // RANK/WORLD_SIZE/...: gotrain launch, torchrun, deepspeed
	SourceSlurm   Source = "slurm"   // srun (SLURM_PROCID, ...)
	SourceOpenMPI Source = "openmpi" // mpirun of Open MPI (OMPI_COMM_WORLD_*)
	SourcePMI     Source = "pmi"     // MPICH, Intel MPI and other PMI launchers (PMI_RANK, ...)
)

// Rank is a process's place in the job and where to rendezvous.
type Rank struct {
	Rank           int    // global rank in [0, WorldSize)
	WorldSize      int    // processes in the job
	LocalRank      int    // rank among this node's processes, in [0, LocalWorldSize); selects the device
	LocalWorldSize int    // processes on this node
	NodeRank       int    // index of this node
	MasterAddr     string // host of rank 0's rendezvous store
	MasterPort     int    // its TCP port
	Source         Source // which launcher's variables these came from
}

// DetectRank works out this process's rank from its environment, read through
// env (os.Getenv in production), so a rank started by gotrain launch, torchrun,
// deepspeed, srun, Open MPI's mpirun or an MPICH/Intel MPI launcher needs no
// gotrain launcher. The variables are tried in that order: the launcher that
// started the process directly sets the most specific ones, and an srun or
// mpirun inside a Slurm allocation still sees the allocation's SLURM_*.
//
// With none of them set it returns rank 0 of 1 on 127.0.0.1:29500 and false.
// Partial or inconsistent variables (RANK without WORLD_SIZE, RANK ≥
// WORLD_SIZE, a non-numeric value, MPI without MASTER_ADDR, a MASTER_ADDR
// that is not a host name such as root@worker-0) are errors that name the
// variable and say what to set. It does not look MASTER_ADDR up; callers
// that are about to rendezvous use CheckMasterAddr for that.
//
// Slurm's variables count only inside a job step (SLURM_STEP_ID set, as srun
// does): sbatch's batch shell also has SLURM_PROCID=0 and SLURM_NTASKS=N, and
// taking it for rank 0 of N would wait forever for peers srun never started.
func DetectRank(env func(string) string) (Rank, bool, error) {
	switch {
	case env("RANK") != "" || env("WORLD_SIZE") != "":
		r, err := rankFromTorchEnv(env)
		return r, true, err
	case env("OMPI_COMM_WORLD_RANK") != "":
		r, err := rankFromMPI(env, SourceOpenMPI, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE")
		return r, true, err
	case env("PMI_RANK") != "":
		r, err := rankFromMPI(env, SourcePMI, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS")
		return r, true, err
	case env("SLURM_PROCID") != "" && (env("SLURM_STEP_ID") != "" || env("SLURM_STEPID") != ""):
		r, err := rankFromSlurm(env)
		return r, true, err
	}
	return Rank{WorldSize: 1, LocalWorldSize: 1, MasterAddr: "127.0.0.1", MasterPort: DefaultMasterPort}, false, nil
}

func rankFromTorchEnv(env func(string) string) (Rank, error) {
	const hint = "; gotrain launch, torchrun and deepspeed set RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT together"
	r := Rank{Source: SourceEnv}
	var err error
	if r.Rank, err = intVar(env, "RANK"); err != nil {
		return Rank{}, fmt.Errorf("%w%s", err, hint)
	}
	if r.WorldSize, err = intVar(env, "WORLD_SIZE"); err != nil {
		return Rank{}, fmt.Errorf("%w%s", err, hint)
	}
	if r.WorldSize == 1 && env("LOCAL_RANK") == "" {
		r.LocalWorldSize = 1
	} else {
		if r.LocalRank, err = intVar(env, "LOCAL_RANK"); err != nil {
			return Rank{}, fmt.Errorf("%w%s", err, hint)
		}
		// LOCAL_SIZE is DeepSpeed's launcher's name for the same number.
		name := "LOCAL_WORLD_SIZE"
		if env(name) == "" && env("LOCAL_SIZE") != "" {
			name = "LOCAL_SIZE"
		}
		if r.LocalWorldSize, err = intVar(env, name); err != nil {
			return Rank{}, fmt.Errorf("%w%s", err, hint)
		}
	}
	if r.NodeRank, err = nodeRankVar(env, r, "GROUP_RANK", "CROSS_RANK", "NODE_RANK"); err != nil {
		return Rank{}, err
	}
	if err := setMaster(env, &r, "a multi-process run needs MASTER_ADDR, the host of rank 0 (gotrain launch sets it)"); err != nil {
		return Rank{}, err
	}
	return r, checkRank(r, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
}

func rankFromMPI(env func(string) string, src Source, rankVar, sizeVar, localVar, localSizeVar string) (Rank, error) {
	r := Rank{Source: src}
	var err error
	for _, v := range []struct {
		dst  *int
		name string
	}{{&r.Rank, rankVar}, {&r.WorldSize, sizeVar}, {&r.LocalRank, localVar}, {&r.LocalWorldSize, localSizeVar}} {
		if *v.dst, err = intVar(env, v.name); err != nil {
			return Rank{}, fmt.Errorf("%s launcher: %w", src, err)
		}
	}
	// MPI does not number nodes; with the usual block placement of equal
	// numbers of ranks per node this is the node index.
	if r.NodeRank, err = nodeRankVar(env, r, "NODE_RANK"); err != nil {
		return Rank{}, err
	}
	if err := setMaster(env, &r, fmt.Sprintf("%s does not say where rank 0 runs: export MASTER_ADDR=<host of rank 0> (mpirun -x MASTER_ADDR passes it on), or start the ranks with gotrain launch", src)); err != nil {
		return Rank{}, err
	}
	return r, checkRank(r, rankVar, sizeVar, localVar, localSizeVar)
}

func rankFromSlurm(env func(string) string) (Rank, error) {
	r := Rank{Source: SourceSlurm}
	var err error
	if r.Rank, err = intVar(env, "SLURM_PROCID"); err != nil {
		return Rank{}, fmt.Errorf("slurm: %w", err)
	}
	// A step may use fewer tasks than the allocation; the step's own
	// variables win when srun set them.
	sizeVar := firstSet(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS")
	if r.WorldSize, err = intVar(env, sizeVar); err != nil {
		return Rank{}, fmt.Errorf("slurm: %w", err)
	}
	if r.LocalRank, err = intVar(env, "SLURM_LOCALID"); err != nil {
		return Rank{}, fmt.Errorf("slurm: %w", err)
	}
	if r.NodeRank, err = intVar(env, "SLURM_NODEID"); err != nil {
		return Rank{}, fmt.Errorf("slurm: %w", err)
	}
	localSizeVar := firstSet(env, "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE")
	if env(localSizeVar) == "" {
		return Rank{}, fmt.Errorf("slurm: none of SLURM_STEP_TASKS_PER_NODE, SLURM_TASKS_PER_NODE, SLURM_NTASKS_PER_NODE is set; run the ranks with srun --ntasks-per-node=N")
	}
	perNode, err := ExpandTasksPerNode(env(localSizeVar))
	if err != nil {
		return Rank{}, fmt.Errorf("slurm: %s: %w", localSizeVar, err)
	}
	switch {
	case len(perNode) == 1:
		r.LocalWorldSize = perNode[0]
	case r.NodeRank < len(perNode):
		r.LocalWorldSize = perNode[r.NodeRank]
	default:
		return Rank{}, fmt.Errorf("slurm: SLURM_NODEID=%d but %s=%q lists %d nodes", r.NodeRank, localSizeVar, env(localSizeVar), len(perNode))
	}
	if env("MASTER_ADDR") == "" {
		// Task 0 runs on the first node of the step.
		listVar := firstSet(env, "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
		if env(listVar) == "" {
			return Rank{}, fmt.Errorf("slurm: neither MASTER_ADDR nor SLURM_JOB_NODELIST is set; export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)")
		}
		hosts, err := ExpandHostlist(env(listVar))
		if err != nil {
			return Rank{}, fmt.Errorf("slurm: %s: %w", listVar, err)
		}
		r.MasterAddr = hosts[0]
	}
	if err := setMaster(env, &r, ""); err != nil {
		return Rank{}, err
	}
	return r, checkRank(r, "SLURM_PROCID", sizeVar, "SLURM_LOCALID", localSizeVar)
}

// setMaster fills MasterAddr (unless already set) and MasterPort from
// MASTER_ADDR and MASTER_PORT. A missing address is an error with the given
// advice when the job has more than one process, and 127.0.0.1 otherwise.
func setMaster(env func(string) string, r *Rank, advice string) error {
	if a := strings.TrimSpace(env("MASTER_ADDR")); a != "" {
		r.MasterAddr = a
	}
	if r.MasterAddr == "" {
		if r.WorldSize > 1 {
			return fmt.Errorf("MASTER_ADDR is not set: %s", advice)
		}
		r.MasterAddr = "127.0.0.1"
	}
	if err := ValidateMasterAddr(r.MasterAddr); err != nil {
		return err
	}
	r.MasterPort = DefaultMasterPort
	if env("MASTER_PORT") != "" {
		p, err := intVar(env, "MASTER_PORT")
		if err != nil {
			return err
		}
		if p < 1 || p > 65535 {
			return fmt.Errorf("MASTER_PORT=%d is not a TCP port (1-65535)", p)
		}
		r.MasterPort = p
	}
	return nil
}

// nodeRankVar reads the first set node-index variable of names, or derives
// the index from the rank when every node runs LocalWorldSize ranks.
func nodeRankVar(env func(string) string, r Rank, names ...string) (int, error) {
	if name := firstSet(env, names...); env(name) != "" {
		return intVar(env, name)
	}
	if r.LocalWorldSize > 0 {
		return r.Rank / r.LocalWorldSize, nil
	}
	return 0, nil
}

func checkRank(r Rank, rankVar, sizeVar, localVar, localSizeVar string) error {
	switch {
	case r.WorldSize < 1:
		return fmt.Errorf("%s=%d: the world size must be at least 1", sizeVar, r.WorldSize)
	case r.Rank >= r.WorldSize:
		return fmt.Errorf("%s=%d is not below %s=%d: ranks are numbered 0 to %d", rankVar, r.Rank, sizeVar, r.WorldSize, r.WorldSize-1)
	case r.LocalWorldSize < 1:
		return fmt.Errorf("%s=%d: a node runs at least 1 process", localSizeVar, r.LocalWorldSize)
	case r.LocalWorldSize > r.WorldSize:
		return fmt.Errorf("%s=%d exceeds %s=%d", localSizeVar, r.LocalWorldSize, sizeVar, r.WorldSize)
	case r.LocalRank >= r.LocalWorldSize:
		return fmt.Errorf("%s=%d is not below %s=%d", localVar, r.LocalRank, localSizeVar, r.LocalWorldSize)
	case r.LocalRank > r.Rank:
		return fmt.Errorf("%s=%d exceeds %s=%d: a rank's local index cannot be larger than its global one", localVar, r.LocalRank, rankVar, r.Rank)
	}
	return nil
}

// intVar reads a required non-negative integer variable.
func intVar(env func(string) string, name string) (int, error) {
	v := strings.TrimSpace(env(name))
	if v == "" {
		return 0, fmt.Errorf("%s is not set", name)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q is not a non-negative whole number", name, env(name))
	}
	return n, nil
}

// firstSet returns the first of names that is set, or the first name when
// none is, so the caller's "not set" error names the preferred variable.
func firstSet(env func(string) string, names ...string) string {
	for _, n := range names {
		if env(n) != "" {
			return n
		}
	}
	return names[0]
}
