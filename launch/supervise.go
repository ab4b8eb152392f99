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

// DefaultSettleWindow is how long the supervisor waits after the first
// failure before it stops the other processes, so that exits caused by the
// same event (a rank killed, its peers losing it) are all seen before it
// says which one failed first.
const DefaultSettleWindow = 500 * time.Millisecond

// sentByLauncher marks a SIGKILL the supervisor sent itself in the messages
// it writes; Blame (on the launcher one level up) relies on it.
const sentByLauncher = "sent by gotrain launch"

// Proc describes one process to start: a rank, or an ssh or srun command.
type Proc struct {
	Label  string   // how messages name it: "rank 3", "node 1 (worker-1)"
	Path   string   // executable
	Args   []string // arguments after argv[0]
	Env    []string // complete environment, KEY=VALUE
	Dir    string   // working directory; "" for the launcher's
	Stdin  io.Reader
	Stdout io.Writer // an *os.File is handed to the child as it is
	Stderr io.Writer // copied through the supervisor, which keeps its last lines
	// Ranks are the global ranks the process is or runs, so that a rank
	// the others report lost can be traced to it; nil when unknown.
	Ranks []int
	// Lifeline, when set, is how the process is asked to stop: closing it
	// (an ssh session's stdin, which the node launcher at the other end
	// watches) replaces SIGTERM. SIGKILL still follows the grace period.
	Lifeline io.Closer
	// Hint, when set, turns the process's last lines of output into advice
	// added to its error (ssh's "Host key verification failed").
	Hint func(tail []string) string
	// CPUs, when set, are the only cores the process may run on
	// (--bind_cores_to_rank); ExecRunner binds it before it starts.
	CPUs []int
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

// ProcessError is the process whose failure stopped the job (see Blame);
// the launcher exits with its ExitCode (137 for a rank killed by SIGKILL).
type ProcessError struct {
	Label  string
	Pid    int
	Status ExitStatus
	// KilledByLauncher says the supervisor sent the SIGKILL itself: the
	// process did not stop within the grace period (it hung).
	KilledByLauncher bool
	// Frozen says the process was stopped (SIGSTOP, Ctrl-Z, a debugger)
	// when the supervisor killed it: alive, not hung.
	Frozen bool
	// Evidence is what the others said about it ("rank 0 reported: comm:
	// lost rank 1 ..."), or the line in which a node launcher named the
	// rank that failed there.
	Evidence string
	// Hint is advice for a known failure (an unknown ssh host key).
	Hint string
	// Code is the status the launcher exits with; Status.ExitCode() when 0.
	Code int
}

func (e *ProcessError) Error() string {
	msg := fmt.Sprintf("%s (pid %d) %s", e.Label, e.Pid, e.Status)
	if e.KilledByLauncher {
		msg += " (" + sentByLauncher + ": it did not stop within the grace period"
		if e.Frozen {
			msg += "; it was stopped (process state T: SIGSTOP, Ctrl-Z or a debugger), so it could not act on SIGTERM"
		}
		msg += ")"
	}
	if e.Evidence != "" {
		msg += "; " + e.Evidence
	}
	if e.Hint != "" {
		msg += "\n" + e.Hint
	}
	return msg
}

// ExitCode is the status the launcher should exit with.
func (e *ProcessError) ExitCode() int {
	if e.Code != 0 {
		return e.Code
	}
	return e.Status.ExitCode()
}

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
	// SettleWindow between the first failure and the stop of the others;
	// DefaultSettleWindow when 0, none when negative.
	SettleWindow time.Duration
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

// tailLines is how many of a process's last lines of output Supervise keeps
// for Blame and the error message.
const tailLines = 8

// Supervise starts every proc through r and waits for all of them.
//
// When one fails (non-zero status or death by signal), it waits the settle
// window for related exits, names the original failure (Blame), asks every
// other process to stop (SIGTERM to its process group, or its Lifeline
// closed), sends SIGKILL after the grace period, and returns a
// *ProcessError for that failure, logging every other non-zero exit it sees
// on the way. When ctx ends first, it stops every process the same way and
// returns an *InterruptedError: exits that honour the stop (130, 143, death
// by SIGTERM) are expected, others are logged. It returns only after every
// process has been reaped, and finally SIGKILLs each process group so that
// no descendant outlives the job. If a proc fails to start, the ones
// already started are stopped the same way.
func Supervise(ctx context.Context, r Runner, procs []Proc, opts SuperviseOptions) error {
	s := newSupervisor(procs, opts)
	events := make(chan exitEvent, len(procs))
	var startErr error
	for i, p := range procs {
		p.Stdout, p.Stderr = s.tails[i].wrap(p.Stdout, p.Stderr)
		proc, err := r.Start(p)
		if err != nil {
			startErr = fmt.Errorf("start %s: %w", p.Label, err)
			if len(s.started) > 0 {
				fmt.Fprintf(s.log, "gotrain launch: %v; stopping the %d already started\n", startErr, len(s.started))
			}
			break
		}
		s.started = append(s.started, proc)
		go func() { events <- exitEvent{i, proc.Wait()} }()
	}
	if startErr != nil {
		s.stop()
	}

	alive := len(s.started)
	done := ctx.Done()
	force := opts.Force
	var settle <-chan time.Time
	for alive > 0 {
		select {
		case ev := <-events:
			alive--
			e := s.record(ev)
			switch {
			case !e.Status.Failed():
			case s.stopping:
				s.logDuringStop(e)
			case settle == nil && s.settle < 0:
				s.failed(alive)
			case settle == nil:
				settle = time.After(s.settle)
			}
		case <-settle:
			settle = nil
			if !s.stopping {
				s.failed(alive)
			}
		case <-done:
			done = nil
			if s.stopping || settle != nil {
				if settle != nil {
					settle = nil
					s.failed(alive)
				}
				continue
			}
			code := opts.InterruptCode
			if code == 0 {
				code = InterruptCode(context.Cause(ctx))
			}
			s.interrupted = &InterruptedError{Cause: context.Cause(ctx), Code: code}
			fmt.Fprintf(s.log, "gotrain launch: interrupted; stopping %d processes (%s, SIGKILL after %v)\n", alive, s.howStop(), s.grace)
			s.stop()
		case <-s.graceTimer:
			s.graceTimer = nil
			fmt.Fprintf(s.log, "gotrain launch: %s still running after %v; sending SIGKILL\n", s.pending(), s.grace)
			s.kill()
		case _, ok := <-force:
			if !ok {
				force = nil
			}
			s.forced = true
			if s.stopping {
				fmt.Fprintf(s.log, "gotrain launch: sending SIGKILL to %s\n", s.pending())
				s.kill()
			}
		}
	}
	if settle != nil && !s.stopping {
		// Every process ended within the settle window.
		s.failed(0)
	}
	// Leaders are reaped; anything they left in their process groups goes too.
	signalAll(s.started, syscall.SIGKILL)
	switch {
	case startErr != nil:
		return startErr
	case s.interrupted != nil:
		return s.interrupted
	case s.culprit != nil:
		return s.finalVerdict()
	}
	return nil
}

// supervisor is Supervise's state; it lives in Supervise's goroutine.
type supervisor struct {
	procs   []Proc
	started []Process
	tails   []*tailWriter
	log     io.Writer
	grace   time.Duration
	settle  time.Duration

	exits    []Exit // in the order seen
	exited   []bool
	stopped  []bool // asked to stop before its exit was seen
	killed   []bool // sent SIGKILL before its exit was seen
	frozen   []bool // stopped (state T) when sent SIGKILL
	stopping bool
	forced   bool

	graceTimer  <-chan time.Time
	culprit     *ProcessError // the failure named when the stop began
	interrupted *InterruptedError
}

func newSupervisor(procs []Proc, opts SuperviseOptions) *supervisor {
	s := &supervisor{
		procs:   procs,
		tails:   make([]*tailWriter, len(procs)),
		log:     opts.Log,
		grace:   opts.GracePeriod,
		settle:  opts.SettleWindow,
		exited:  make([]bool, len(procs)),
		stopped: make([]bool, len(procs)),
		killed:  make([]bool, len(procs)),
		frozen:  make([]bool, len(procs)),
	}
	if s.log == nil {
		s.log = io.Discard
	}
	if s.grace <= 0 {
		s.grace = DefaultGracePeriod
	}
	if s.settle == 0 {
		s.settle = DefaultSettleWindow
	}
	for i := range procs {
		s.tails[i] = newTailWriter(tailLines)
	}
	return s
}

func (s *supervisor) record(ev exitEvent) Exit {
	s.exited[ev.i] = true
	p := s.procs[ev.i]
	e := Exit{Label: p.Label, Pid: s.started[ev.i].Pid(), Ranks: p.Ranks, Status: ev.status,
		Tail: s.tails[ev.i].Lines(), Stopped: s.stopped[ev.i], Killed: s.killed[ev.i], Frozen: s.frozen[ev.i]}
	s.exits = append(s.exits, e)
	return e
}

// failed names the original failure among the exits so far and stops the
// others.
func (s *supervisor) failed(alive int) {
	s.culprit = s.verdict()
	for _, e := range s.exits {
		if e.Status.Failed() && e.Label != s.culprit.Label {
			fmt.Fprintf(s.log, "gotrain launch: %s (pid %d) %s%s\n", e.Label, e.Pid, e.Status, lastLine(e))
		}
	}
	if alive > 0 {
		fmt.Fprintf(s.log, "gotrain launch: %v; stopping the other %d (%s, SIGKILL after %v)\n", s.culprit, alive, s.howStop(), s.grace)
	} else {
		fmt.Fprintf(s.log, "gotrain launch: %v\n", s.culprit)
	}
	s.stop()
}

// finalVerdict is Blame over every exit; exits seen during the stop can
// show that the process first blamed only reacted to another's failure.
func (s *supervisor) finalVerdict() error {
	v := s.verdict()
	if v.Label != s.culprit.Label {
		fmt.Fprintf(s.log, "gotrain launch: the original failure: %v\n", v)
	}
	return v
}

func (s *supervisor) verdict() *ProcessError {
	v := Blame(s.exits)
	e := s.exits[v.Index]
	pe := &ProcessError{Label: e.Label, Pid: e.Pid, Status: e.Status, Evidence: v.Evidence, Code: v.Code,
		KilledByLauncher: e.Killed && e.Status.Signal == syscall.SIGKILL, Frozen: e.Frozen}
	for i, p := range s.procs {
		if p.Label == e.Label && p.Hint != nil {
			pe.Hint = p.Hint(s.tails[i].Lines())
		}
	}
	return pe
}

// logDuringStop reports a non-zero exit seen while the job is being
// stopped; exits that honour an interrupt are what the stop asked for.
func (s *supervisor) logDuringStop(e Exit) {
	if s.interrupted != nil && (StopStatus(e.Status) || e.Killed) {
		return
	}
	how := e.Status.String()
	if e.Killed && e.Status.Signal == syscall.SIGKILL {
		how += " (" + sentByLauncher + " after the grace period"
		if e.Frozen {
			how += "; it was stopped: process state T"
		}
		how += ")"
	}
	fmt.Fprintf(s.log, "gotrain launch: during the stop, %s (pid %d) %s%s\n", e.Label, e.Pid, how, lastLine(e))
}

// lastLine is ": " and the last line of e's output, or "".
func lastLine(e Exit) string {
	if len(e.Tail) == 0 || e.Status.Signal != 0 {
		return ""
	}
	return ": " + strings.TrimPrefix(strings.TrimSpace(e.Tail[len(e.Tail)-1]), "gotrain: ")
}

// howStop says how the processes are asked to stop, for the log.
func (s *supervisor) howStop() string {
	lifelines := 0
	for _, p := range s.procs {
		if p.Lifeline != nil {
			lifelines++
		}
	}
	switch {
	case s.forced:
		return "SIGKILL"
	case lifelines == len(s.procs):
		return "closing their ssh sessions' stdin"
	case lifelines > 0:
		return "SIGTERM or closing stdin"
	}
	return "SIGTERM"
}

// stop asks every process to stop: its lifeline closed or SIGTERM (SIGKILL
// after a second interrupt), and starts the grace period.
func (s *supervisor) stop() {
	s.stopping = true
	for i, p := range s.started {
		if !s.exited[i] {
			s.stopped[i] = true
		}
		switch {
		case s.forced:
			_ = p.Signal(syscall.SIGKILL)
			s.killed[i] = !s.exited[i] || s.killed[i]
		case s.procs[i].Lifeline != nil:
			_ = s.procs[i].Lifeline.Close()
		default:
			_ = p.Signal(syscall.SIGTERM)
		}
	}
	s.graceTimer = time.NewTimer(s.grace).C
}

// kill sends SIGKILL to every process group, noting first which of the
// processes still running were stopped rather than hung.
func (s *supervisor) kill() {
	for i, p := range s.started {
		if !s.exited[i] {
			s.killed[i] = true
			s.frozen[i] = processStopped(p.Pid())
		}
		_ = p.Signal(syscall.SIGKILL)
	}
}

func (s *supervisor) pending() string {
	var names []string
	for i := range s.started {
		if !s.exited[i] {
			names = append(names, s.procs[i].Label)
		}
	}
	return strings.Join(names, ", ")
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

// SignalCause is the cause of a context that a signal ended; launchers
// cancel with it so that InterruptCode need not parse text.
type SignalCause struct{ Signal syscall.Signal }

func (c SignalCause) Error() string { return c.Signal.String() + " signal received" }

// InterruptCode maps the cause of a cancelled context to the launcher's exit
// status, 128 + the signal's number: 143 for SIGTERM, 129 for SIGHUP, 130
// for SIGINT and for any other cause. It reads a SignalCause, or the text of
// os/signal.NotifyContext's cause ("terminated signal received"), which also
// matches context.Canceled.
func InterruptCode(cause error) int {
	var sc SignalCause
	if errors.As(cause, &sc) && sc.Signal > 0 {
		return 128 + int(sc.Signal)
	}
	if cause != nil {
		text := cause.Error()
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT} {
			if strings.Contains(text, sig.String()+" signal received") {
				return 128 + int(sig)
			}
		}
	}
	return 128 + int(syscall.SIGINT)
}
