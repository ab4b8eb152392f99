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
// Each command gets a pipe as stdin that holds Command.Stdin and then stays
// open until the command is asked to stop (StopByStdin) or RunCommands
// returns: a node launcher started with --stdin-lifeline sees its stdin end,
// and stops its ranks, as soon as this launcher stops the job or its
// connection to this launcher is gone for any reason.
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
		if len(c.Stdin) > maxStdinEnv {
			return fmt.Errorf("%s: %d bytes for stdin; at most %d fit before the command starts", c.Label, len(c.Stdin), maxStdinEnv)
		}
		// Smaller than a pipe's buffer, so this does not wait for a reader.
		if _, err := io.WriteString(wr, c.Stdin); err != nil {
			return fmt.Errorf("stdin of %s: %w", c.Label, err)
		}
		procs[i] = Proc{Label: c.Label, Path: c.Argv[0], Args: c.Argv[1:], Env: env, Stdin: rd, Ranks: c.Ranks, Hint: c.Hint}
		if c.StopByStdin {
			procs[i].Lifeline = wr
		}
		if i == 0 {
			procs[i].Stdout, procs[i].Stderr = stdout, stderr
		} else {
			w := shared.Prefixed("")
			procs[i].Stdout, procs[i].Stderr = w, w
		}
	}
	return Supervise(ctx, r, procs, opts)
}
