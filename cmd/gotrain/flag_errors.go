package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/internal/didyoumean"
)

// A command line gotrain cannot parse gets one line: what is wrong, the
// flag probably meant, and where every flag is listed. urfave's own answer
// is the command's whole help page, in which the one useful line is lost.

// usageError is every command's OnUsageError: err is urfave's parse error.
// main prefixes "gotrain: ".
func usageError(c *cli.Context, err error, _ bool) error {
	path := commandPath(c)
	msg := strings.TrimPrefix(strings.TrimPrefix(path, c.App.Name), " ")
	if msg != "" {
		msg += ": "
	}
	if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		msg += "unknown flag --" + name
		if s := closestFlag(c.Command, name); s != "" {
			msg += fmt.Sprintf("; did you mean --%s?", s)
		}
		return fmt.Errorf("%s (%s --help lists every flag)", msg, path)
	}
	return fmt.Errorf("%s%w (%s --help lists every flag)", msg, err, path)
}

// commandPath is the command being run as typed: "gotrain config explain".
func commandPath(c *cli.Context) string {
	var names []string
	for _, ctx := range c.Lineage() {
		if ctx.Command != nil && ctx.Command.Name != "" {
			names = append(names, ctx.Command.Name)
		}
	}
	slices.Reverse(names)
	if len(names) == 0 || names[0] != c.App.Name {
		names = append([]string{c.App.Name}, names...)
	}
	return strings.Join(names, " ")
}

// closestFlag is the name among cmd's visible flags (aliases included)
// that name probably meant, or "". A name that differs only in case and in
// its '-' or '_' separators comes first, so Hugging Face's save_steps finds
// --save_steps, never a look-alike such as --stages.
func closestFlag(cmd *cli.Command, name string) string {
	if cmd == nil {
		return ""
	}
	var names []string
	for _, f := range cmd.Flags {
		if flagHidden(f) {
			continue
		}
		names = append(names, f.Names()...)
	}
	return didyoumean.Suggest(name, names)
}

// flagHidden reports whether f is left out of help (a flag for gotrain's
// own use).
func flagHidden(f cli.Flag) bool {
	v, ok := f.(cli.VisibleFlag)
	return ok && !v.IsVisible()
}

// setUsageErrors makes usageError the usage-error handler of cmds and of
// every command below them.
func setUsageErrors(cmds []*cli.Command) {
	for _, c := range cmds {
		c.OnUsageError = usageError
		setUsageErrors(c.Subcommands)
	}
}

// refuseArgs makes cmd, which takes no positional arguments, fail on any,
// naming them: a stray word (`train ... extra`, or a value after a flag
// that takes none) is otherwise dropped without a word, and the run is not
// the one asked for.
func refuseArgs(cmd *cli.Command) *cli.Command {
	action := cmd.Action
	cmd.Action = func(c *cli.Context) error {
		if c.NArg() > 0 {
			quoted := make([]string, c.NArg())
			for i, a := range c.Args().Slice() {
				quoted[i] = fmt.Sprintf("%q", a)
			}
			return fmt.Errorf("%s: unexpected argument %s: it takes only flags (--name value); see %s --help",
				cmd.Name, strings.Join(quoted, " "), commandPath(c))
		}
		return action(c)
	}
	return cmd
}
