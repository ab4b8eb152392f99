package launch

import (
	"context"
	"fmt"
	"io"
	"os"
)

// RunCommands runs the local half of a multi-node launch (the ssh per node,
// or srun) under Supervise. env is the environment of every command. The
// first command writes to stdout and stderr directly, since it carries rank
// 0; the others' lines go to stderr whole (the node launchers have already
// prefixed them with their ranks).
//
// Each command gets a pipe as stdin that is never written and stays open
// until RunCommands returns: a node launcher started with --stdin-lifeline
// sees its stdin end, and stops its ranks, as soon as the connection to this
// launcher is gone for any reason.
func RunCommands(ctx context.Context, r Runner, cmds []Command, env []string, stdout, stderr io.Writer, opts SuperviseOptions) error {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	shared := NewSharedOutput(stderr)
	if opts.Log == nil {
		opts.Log = shared
	}
	procs := make([]Proc, len(cmds))
	for i, c := range cmds {
		if len(c.Argv) == 0 {
			return fmt.Errorf("%s: empty command line", c.Label)
		}
		rd, wr, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("stdin pipe for %s: %w", c.Label, err)
		}
		// The child has its own copy of rd once started; wr is what keeps
		// the lifeline open.
		defer rd.Close()
		defer wr.Close()
		procs[i] = Proc{Label: c.Label, Path: c.Argv[0], Args: c.Argv[1:], Env: env, Stdin: rd}
		if i == 0 {
			procs[i].Stdout, procs[i].Stderr = stdout, stderr
		} else {
			w := shared.Prefixed("")
			procs[i].Stdout, procs[i].Stderr = w, w
		}
	}
	return Supervise(ctx, r, procs, opts)
}
