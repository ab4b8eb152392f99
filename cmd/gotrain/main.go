// Command gotrain trains GPT-family language models data-parallel with ZeRO
// stages 0–3 from the DeepSpeed JSON config users already have:
//
//	gotrain --config ds_zero3.json --model gpt2 --data 'data/train_*.bin'
//
// main is thin: it builds the command tree (app.go, one file per subcommand),
// runs it, and turns an error into a message and an exit status.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// A closed output pipe (an ssh session that ended, `| head`) must be a
	// write error, not the end of the process: a node launcher killed by
	// SIGPIPE would take its ranks down before they save.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newApp(os.Stdout, os.Stderr).RunContext(ctx, normalizeArgs(os.Args))
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gotrain:", err)
		var ec exitCoder
		if errors.As(err, &ec) {
			os.Exit(ec.ExitCode())
		}
		os.Exit(1)
	}
}

// exitCoder is an error that carries the process exit status (a rank's exit
// code passed through by the launcher, for example).
type exitCoder interface {
	error
	ExitCode() int
}
