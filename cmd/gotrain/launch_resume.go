package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/checkpoint"
	"github.com/gotrain/gotrain/launch"
)

// withResumeHint runs launch's action and, when a training job ends by a
// signal (a rank killed, or the job interrupted) with checkpoints on disk,
// prints the command line that continues it before the verdict.
func withResumeHint(action cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		err := action(c)
		// A node launcher started over ssh leaves the advice to the launcher
		// the user ran.
		if err != nil && stoppedBySignal(err) && c.String("world_info") == "" {
			if hint := resumeHint(c, os.Args); hint != "" {
				fmt.Fprint(c.App.ErrWriter, hint)
			}
		}
		return err
	}
}

// stoppedBySignal reports whether a job ended because a rank was killed by a
// signal or exited as one stopped by a signal does (128+n), or because the
// launcher itself was interrupted: ends a resume can continue from.
func stoppedBySignal(err error) bool {
	var ie *launch.InterruptedError
	if errors.As(err, &ie) {
		return true
	}
	var pe *launch.ProcessError
	return errors.As(err, &pe) && (pe.Status.Signal != 0 || pe.Status.Code > 128 && pe.Status.Code < 128+65)
}

// resumeHint is the advice for a stopped training job whose output
// directory holds checkpoints: the launch command line argv with the ranks'
// --resume set to auto; "" when the ranks do not train or nothing was saved.
// c.Args() are the ranks' arguments, the tail of argv.
func resumeHint(c *cli.Context, argv []string) string {
	args := c.Args().Slice()
	train := findCommand(c.App.Commands, "train")
	if len(args) == 0 || train == nil || !train.HasName(args[0]) || len(argv) < len(args) {
		return ""
	}
	dir := checkpoint.Dir(rankFlagValue(train, args[1:], "output-dir"))
	latest, hasLatest, _ := checkpoint.Latest(dir)
	if has, _ := checkpoint.HasTags(dir); !has {
		return ""
	}
	head := argv[:len(argv)-len(args)]
	if strings.Join(argv[len(argv)-len(args):], "\x00") != strings.Join(args, "\x00") {
		// Not the process's own command line (an in-process caller): the
		// launch flags as parsed are unknown, so name launch alone.
		head = []string{c.App.Name, "launch"}
	}
	line := launch.ShellJoin(append(append(append([]string{}, head...), args[0]), resumeArgs(train, args[1:])...))
	saved := "checkpoints are saved in " + dir
	if hasLatest {
		saved = fmt.Sprintf("checkpoint %s is saved in %s", latest, dir)
	}
	return fmt.Sprintf("gotrain launch: %s; continue the job with:\n  %s\n", saved, line)
}

// resumeArgs are train's arguments args continued from the run's
// checkpoints: any --resume (or Hugging Face's --resume_from_checkpoint)
// replaced by --resume auto, and without --overwrite, which would move the
// checkpoints aside.
func resumeArgs(train *cli.Command, args []string) []string {
	var out, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = args[i:]
			break
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		next := i+1 < len(args) && !strings.HasPrefix(args[i+1], "-")
		switch {
		case !strings.HasPrefix(a, "-"):
			out = append(out, a)
			continue
		case name == "resume" || name == "resume_from_checkpoint":
			if !hasValue && next {
				i++
			}
			continue
		case name == "overwrite":
			if _, ok := truthWord(argAt(args, i+1)); !hasValue && next && ok {
				i++
			}
			continue
		}
		out = append(out, a)
		if !hasValue && takesValue(train, name) && i+1 < len(args) {
			out = append(out, args[i+1])
			i++
		}
	}
	return append(append(out, "--resume", "auto"), rest...)
}

// argAt is args[i], or "" past the end.
func argAt(args []string, i int) string {
	if i < len(args) {
		return args[i]
	}
	return ""
}
