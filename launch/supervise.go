package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"
)

// DefaultGracePeriod is how long ranks get between SIGTERM (save and exit)
// and SIGKILL when a job is being stopped.
const DefaultGracePeriod = 10 * time.Second

// Proc describes one process to start: a rank, or an ssh or srun command.
type Proc struct {
	Label  string   // how messages name it: "rank 3", "node 1 (worker-1)"
	Path   string   // executable
	Args   []string // arguments after argv[0]
	Env    []string // complete environment, KEY=VALUE
	Dir    string   // working directory; "" for the launcher's
	Stdin  io.Reader
	Stdout io.Writer // an *os.File is handed to the child as it is
	Stderr io.Writer
}

// Runner starts processes. ExecRunner starts real ones; tests inject fakes.
type Runner interface {
	Start(p Proc) (Process, error)
}

// Process is a started process. Wait may be called once; Signal may be
// called from any goroutine, also after the process exited (it then reaches
// whatever is left of its process group, or nothing).
type Process interface {
	Pid() int
	Wait() ExitStatus
	Signal(sig syscall.Signal) error
}

// ExitStatus is how a process ended: Code when it exited, Signal when a
// signal killed it, Err when waiting for it failed.
type ExitStatus struct {
	Code   int
	Signal syscall.Signal
	Err    error
}

// Failed reports whether the process did not exit with status 0.
func (s ExitStatus) Failed() bool { return s.Code != 0 || s.Signal != 0 || s.Err != nil }

// ExitCode is the shell convention: the exit status, or 128+signal number.
func (s ExitStatus) ExitCode() int {
	switch {
	case s.Signal != 0:
		return 128 + int(s.Signal)
	case s.Err != nil && s.Code == 0:
		return 1
	}
	return s.Code
}

func (s ExitStatus) String() string {
	switch {
	case s.Signal != 0:
		return "was killed by signal " + SignalName(s.Signal)
	case s.Err != nil:
		return "could not be waited for: " + s.Err.Error()
	}
	return fmt.Sprintf("exited with status %d", s.Code)
}

// ProcessError is the first process of a job that failed; the launcher
// exits with its ExitCode (137 for a rank killed by SIGKILL).
type ProcessError struct {
	Label  string
	Pid    int
	Status ExitStatus
}

func (e *ProcessError) Error() string {
	return fmt.Sprintf("%s (pid %d) %s", e.Label, e.Pid, e.Status)
}

// ExitCode is the status the launcher should exit with.
func (e *ProcessError) ExitCode() int { return e.Status.ExitCode() }

// InterruptedError says the launcher was asked to stop (Ctrl-C, SIGTERM) and
// stopped every process.
type InterruptedError struct {
	Cause error // why the context ended
	Code  int   // 130 for SIGINT, 143 for SIGTERM
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("interrupted (%v); all processes were stopped", e.Cause)
}

// ExitCode is the status the launcher should exit with.
func (e *InterruptedError) ExitCode() int { return e.Code }

// SuperviseOptions tune Supervise.
type SuperviseOptions struct {
	// GracePeriod between SIGTERM and SIGKILL; DefaultGracePeriod when 0.
	GracePeriod time.Duration
	// Log receives the supervisor's own messages (which process failed, what
	// is being stopped); nil discards them.
	Log io.Writer
	// Force, when it delivers or is closed during a graceful stop, SIGKILLs
	// every process at once (a second Ctrl-C).
	Force <-chan struct{}
	// InterruptCode is the exit code reported when ctx ends; when 0 it is
	// InterruptCode(context.Cause(ctx)): 143 for SIGTERM, else 130.
	InterruptCode int
}

type exitEvent struct {
	i      int
	status ExitStatus
}

// Supervise starts every proc through r and waits for all of them. When one
// fails (non-zero status or death by signal), it names it, sends SIGTERM to
// every other process group, SIGKILL after the grace period, and returns a
// *ProcessError for that first failure. When ctx ends, it does the same to
// all processes and returns an *InterruptedError. It returns only after every
// process has been reaped, and finally SIGKILLs each process group so that no
// descendant outlives the job. If a proc fails to start, the ones already
// started are stopped the same way.
func Supervise(ctx context.Context, r Runner, procs []Proc, opts SuperviseOptions) error {
	grace := opts.GracePeriod
	if grace <= 0 {
		grace = DefaultGracePeriod
	}
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	started := make([]Process, 0, len(procs))
	events := make(chan exitEvent, len(procs))
	var failure error
	for i, p := range procs {
		proc, err := r.Start(p)
		if err != nil {
			failure = fmt.Errorf("start %s: %w", p.Label, err)
			if len(started) > 0 {
				fmt.Fprintf(logw, "gotrain launch: %v; stopping the %d already started\n", failure, len(started))
			}
			break
		}
		started = append(started, proc)
		go func() { events <- exitEvent{i, proc.Wait()} }()
	}

	exited := make([]bool, len(started))
	alive := len(started)
	var graceTimer <-chan time.Time
	done := ctx.Done()
	force := opts.Force
	stopping, forced := false, false
	stop := func() {
		stopping = true
		done = nil
		sig := syscall.SIGTERM
		if forced {
			sig = syscall.SIGKILL
		}
		signalAll(started, sig)
		graceTimer = time.NewTimer(grace).C
	}
	if failure != nil {
		stop()
	}
	for alive > 0 {
		select {
		case ev := <-events:
			alive--
			exited[ev.i] = true
			if !ev.status.Failed() || stopping {
				continue
			}
			failure = &ProcessError{Label: procs[ev.i].Label, Pid: started[ev.i].Pid(), Status: ev.status}
			if alive > 0 {
				fmt.Fprintf(logw, "gotrain launch: %v; stopping the other %d (SIGTERM, SIGKILL after %v)\n", failure, alive, grace)
			} else {
				fmt.Fprintf(logw, "gotrain launch: %v\n", failure)
			}
			stop()
		case <-done:
			code := opts.InterruptCode
			if code == 0 {
				code = InterruptCode(context.Cause(ctx))
			}
			failure = &InterruptedError{Cause: context.Cause(ctx), Code: code}
			fmt.Fprintf(logw, "gotrain launch: interrupted; stopping %d processes (SIGTERM, SIGKILL after %v)\n", alive, grace)
			stop()
		case <-graceTimer:
			graceTimer = nil
			fmt.Fprintf(logw, "gotrain launch: %s still running after %v; sending SIGKILL\n", pending(procs, exited), grace)
			signalAll(started, syscall.SIGKILL)
		case _, ok := <-force:
			if !ok {
				force = nil
			}
			forced = true
			if stopping {
				fmt.Fprintf(logw, "gotrain launch: sending SIGKILL to %s\n", pending(procs, exited))
				signalAll(started, syscall.SIGKILL)
			}
		}
	}
	// Leaders are reaped; anything they left in their process groups goes too.
	signalAll(started, syscall.SIGKILL)
	return failure
}

// signalAll signals every process group, also those whose leader exited:
// what a rank started may still be running, and may even hold the rank's
// output pipe open so that its exit is not reported yet. ESRCH (nothing left
// in a group) is expected and ignored.
func signalAll(procs []Process, sig syscall.Signal) {
	for _, p := range procs {
		_ = p.Signal(sig)
	}
}

func pending(procs []Proc, exited []bool) string {
	var names []string
	for i, e := range exited {
		if !e {
			names = append(names, procs[i].Label)
		}
	}
	return strings.Join(names, ", ")
}

// SignalName is the short name ("KILL", "TERM") of common signals, and
// "signal N" for others.
func SignalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGHUP: "HUP", syscall.SIGINT: "INT", syscall.SIGQUIT: "QUIT", syscall.SIGILL: "ILL",
		syscall.SIGTRAP: "TRAP", syscall.SIGABRT: "ABRT", syscall.SIGBUS: "BUS", syscall.SIGFPE: "FPE",
		syscall.SIGKILL: "KILL", syscall.SIGUSR1: "USR1", syscall.SIGSEGV: "SEGV", syscall.SIGUSR2: "USR2",
		syscall.SIGPIPE: "PIPE", syscall.SIGALRM: "ALRM", syscall.SIGTERM: "TERM",
	}
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}

// InterruptCode maps the cause of a cancelled context to the launcher's exit
// status: 143 when it names SIGTERM ("terminated", as os/signal.NotifyContext
// reports it), 130 (Ctrl-C) otherwise.
func InterruptCode(cause error) int {
	if cause != nil && strings.Contains(cause.Error(), syscall.SIGTERM.String()) && !errors.Is(cause, context.Canceled) {
		return 128 + int(syscall.SIGTERM)
	}
	return 128 + int(syscall.SIGINT)
}
