package launch

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// AllowedCPUs are the CPUs this process may run on (its affinity mask, as
// taskset or Slurm's cgroup set it), in increasing order.
func AllowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("read the CPU affinity: %w", err)
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// withAffinity runs start (a fork and exec) on the calling OS thread with
// its affinity narrowed to cpus, which the child inherits, and restores
// the thread's mask afterwards. The caller must have locked the goroutine
// to its thread.
func withAffinity(cpus []int, start func() error) error {
	if len(cpus) == 0 {
		return start()
	}
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return fmt.Errorf("read the CPU affinity: %w", err)
	}
	for _, c := range cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("bind to cores %v: %w", cpus, err)
	}
	err := start()
	if rerr := unix.SchedSetaffinity(0, &old); err == nil && rerr != nil {
		err = fmt.Errorf("restore the CPU affinity: %w", rerr)
	}
	return err
}
