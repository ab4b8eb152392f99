//go:build unix && !linux

package launch

import "syscall"

// Without a parent-death signal, ranks of a launcher killed -9 are stopped
// only by their own failing collectives.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
