//go:build unix

package launch

import (
	"errors"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// ExecRunner starts real processes, each in its own process group so that a
// signal reaches everything a rank started, and (on Linux) with SIGKILL as
// the parent-death signal so ranks die with a launcher that is killed -9.
type ExecRunner struct{}

// outputDrain bounds how long Wait keeps copying a child's output after it
// exited, in case a grandchild it left behind still holds the pipe open.
const outputDrain = 2 * time.Second

// Start starts p. After the process exits, Stdout and Stderr that have a
// Flush() error method are flushed.
func (ExecRunner) Start(p Proc) (Process, error) {
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = p.Env
	cmd.Dir = p.Dir
	cmd.Stdin = p.Stdin
	cmd.Stdout = p.Stdout
	cmd.Stderr = p.Stderr
	cmd.SysProcAttr = childProcAttr()
	cmd.WaitDelay = outputDrain

	ep := &execProcess{status: make(chan ExitStatus, 1)}
	started := make(chan error, 1)
	go func() {
		// The parent-death signal fires when the thread that forked the
		// child exits, not the process, and Go may retire threads; this
		// thread stays locked to this goroutine until the child is reaped.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := withAffinity(p.CPUs, cmd.Start); err != nil {
			started <- err
			return
		}
		ep.pid = cmd.Process.Pid
		started <- nil
		err := cmd.Wait()
		flushWriter(p.Stdout)
		if p.Stderr != p.Stdout {
			flushWriter(p.Stderr)
		}
		ep.status <- exitStatusOf(cmd, err)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return ep, nil
}

type execProcess struct {
	pid    int
	status chan ExitStatus
}

func (p *execProcess) Pid() int { return p.pid }

func (p *execProcess) Wait() ExitStatus { return <-p.status }

// Signal signals the whole process group, which the child leads.
func (p *execProcess) Signal(sig syscall.Signal) error {
	return syscall.Kill(-p.pid, sig)
}

func exitStatusOf(cmd *exec.Cmd, err error) ExitStatus {
	ps := cmd.ProcessState
	if ps == nil {
		return ExitStatus{Err: err}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ExitStatus{Signal: ws.Signal()}
	}
	st := ExitStatus{Code: ps.ExitCode()}
	// A late output error (exec.ErrWaitDelay, a closed log file) does not
	// change how the process ended.
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) && st.Code == 0 {
		st.Err = err
	}
	return st
}

func flushWriter(w any) {
	if f, ok := w.(interface{ Flush() error }); ok {
		_ = f.Flush()
	}
}
