package launch

import (
	"fmt"
	"strconv"
)

// DeepSpeed's --bind_cores_to_rank: each of a node's ranks runs on its own
// share of the cores the launcher may use, so that ranks sharing a machine
// do not fight over cores (and their caches) — on a CPU run, where every
// rank computes on the cores, it is the difference between N ranks each at
// full speed and N ranks thrashing.

// BoundCoresEnv is set in a rank's environment to the number of cores it
// is bound to; gotrain train then uses that many threads.
const BoundCoresEnv = "GOTRAIN_BOUND_CORES"

// SplitCores divides cpus among ranks ranks in contiguous, near-equal
// shares (the first len(cpus) mod ranks ranks get one more), in order, as
// DeepSpeed's launcher does with numactl. It is an error when there are
// fewer cores than ranks.
func SplitCores(cpus []int, ranks int) ([][]int, error) {
	if ranks < 1 {
		return nil, fmt.Errorf("bind cores: %d ranks", ranks)
	}
	if len(cpus) < ranks {
		return nil, fmt.Errorf("--bind_cores_to_rank: %d cores for %d ranks on this node; every rank needs at least one (lower --nproc)", len(cpus), ranks)
	}
	out := make([][]int, ranks)
	per, extra := len(cpus)/ranks, len(cpus)%ranks
	at := 0
	for r := range out {
		n := per
		if r < extra {
			n++
		}
		out[r] = cpus[at : at+n : at+n]
		at += n
	}
	return out, nil
}

// coreEnv is the environment of a rank bound to cpus: gotrain's thread
// count, and OMP_NUM_THREADS as DeepSpeed sets it for OpenMP (OpenBLAS).
func coreEnv(cpus []int) []string {
	n := strconv.Itoa(len(cpus))
	return []string{BoundCoresEnv + "=" + n, "OMP_NUM_THREADS=" + n}
}
