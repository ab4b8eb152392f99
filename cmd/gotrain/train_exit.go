package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/gotrain/gotrain/trainer"
)

// stoppedError is how a rank stopped by a signal ends: after its clean save
// it exits 128+signal (143 for SIGTERM, 130 for SIGINT), as a process killed
// by that signal would, because the job did not finish: a scheduler or a
// `gotrain train ... && next-step` chain must not take it for done. The
// launcher passes the code on.
type stoppedError struct {
	msg  string
	code int
}

func (e *stoppedError) Error() string { return e.msg }

// ExitCode is the process exit status main uses.
func (e *stoppedError) ExitCode() int { return e.code }

// stoppedExit turns the trainer's StoppedError into the one line the user
// sees and the exit status; other errors pass through.
func stoppedExit(err error) error {
	var st *trainer.StoppedError
	if !errors.As(err, &st) {
		return err
	}
	name, code, _ := signalOf(st.Cause)
	switch {
	case st.Checkpoint != "":
		return &stoppedError{code: code, msg: fmt.Sprintf("stopped by %s after saving checkpoint %s; continue with --resume auto", name, st.Checkpoint)}
	case st.Step > 0:
		return &stoppedError{code: code, msg: fmt.Sprintf("stopped by %s after step %d; nothing was saved (no --output-dir)", name, st.Step)}
	}
	return &stoppedError{code: code, msg: fmt.Sprintf("stopped by %s before the first step; nothing to save", name)}
}

// signalOf names the signal a context was cancelled by, with the exit
// status a process killed by it has; ok is false (and the name "a signal",
// the status 1) for any other cause.
func signalOf(cause error) (name string, code int, ok bool) {
	if cause == nil {
		return "a signal", 1, false
	}
	// os/signal's NotifyContext cancels with "<signal> signal received".
	switch msg := cause.Error(); {
	case strings.HasPrefix(msg, syscall.SIGTERM.String()):
		return "SIGTERM", 128 + int(syscall.SIGTERM), true
	case strings.HasPrefix(msg, os.Interrupt.String()):
		return "SIGINT", 128 + int(syscall.SIGINT), true
	}
	return "a signal", 1, false
}

// interruptedExit is stoppedExit for a signal that arrives before training
// starts (what says when, e.g. "during the rendezvous"): the exit status a
// signal gives and one line saying so, with err's detail. Any other error
// passes through.
func interruptedExit(ctx context.Context, what string, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	name, code, ok := signalOf(context.Cause(ctx))
	if !ok {
		return err
	}
	return &stoppedError{code: code, msg: fmt.Sprintf("stopped by %s %s; nothing was trained or saved (%v)", name, what, err)}
}

// printSummary is rank 0's last line: the run's losses, or, when the
// checkpoint it resumed was already at --max-steps, that nothing was done.
func printSummary(out io.Writer, res *trainer.Result, maxSteps int) {
	if res.StartStep > maxSteps {
		at := "at"
		if res.StartStep-1 > maxSteps {
			at = "past"
		}
		fmt.Fprintf(out, "nothing to do: checkpoint %s is already %s --max-steps %d; raise --max-steps to train further\n",
			res.ResumedFrom, at, maxSteps)
		return
	}
	fmt.Fprintf(out, "done: %d steps | loss %.4f → %.4f", res.Steps, res.FirstLoss, res.FinalLoss)
	if res.FirstValLoss == res.FirstValLoss { // not NaN
		fmt.Fprintf(out, " | val loss %.4f → %.4f", res.FirstValLoss, res.FinalValLoss)
	}
	fmt.Fprintf(out, " | %.0f tok/s | MFU %.1f%% | weights %s\n", res.TokensPerSecond, 100*res.MFU, res.WeightsPath)
}
