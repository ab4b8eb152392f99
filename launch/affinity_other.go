//go:build !linux

package launch

import (
	"errors"
	"runtime"
)

// AllowedCPUs are the CPUs this process may run on; outside Linux, all of them.
func AllowedCPUs() ([]int, error) {
	cpus := make([]int, runtime.NumCPU())
	for i := range cpus {
		cpus[i] = i
	}
	return cpus, nil
}

// withAffinity binds only on Linux.
func withAffinity(cpus []int, start func() error) error {
	if len(cpus) > 0 {
		return errors.New("--bind_cores_to_rank is supported on Linux only")
	}
	return start()
}
