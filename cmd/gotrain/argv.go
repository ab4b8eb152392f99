package main

import (
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
)

// Command lines as DeepSpeed, Hugging Face and Accelerate users type them.
//
// urfave/cli v2 stops reading flags at the first positional argument, and
// has no flag whose value is optional. Rather than move to another CLI
// library (every command's flags would change type, and the other commands'
// tests with them), gotrain rewrites the argument list once, before urfave
// parses it:
//
//   - flags after positional arguments move in front of them, as Python's
//     argparse allows (`gotrain config validate ds.json --nproc 4`);
//   - `--deepspeed` is DeepSpeed's boolean when another flag or nothing
//     follows (`--deepspeed --deepspeed_config ds.json`) and is dropped, and
//     Hugging Face's `--deepspeed ds.json` otherwise, which becomes --config;
//   - `--local_rank=N`, `--local_rank N` and `--local-rank N`, which
//     DeepSpeed's and torch's launchers append, are dropped: the rank comes
//     from the environment (LOCAL_RANK), which those launchers also set;
//   - `--resume_from_checkpoint [DIR]` becomes --resume DIR, or --resume auto
//     without a directory (Hugging Face's "True");
//   - a boolean flag followed by a truth word takes it as its value, as
//     Hugging Face's argument parser does (`--bf16 False`, `--bf16 no`), and
//     `--bf16=yes` is spelled as urfave reads it: urfave's booleans take a
//     value only after "=", so the word would otherwise be a positional
//     argument and the flag true.
//
// Everything after `--`, and everything after `gotrain launch`'s command
// name (the ranks' own command line, rewritten by each rank), is left alone.

// rewriteArgs returns args (args[0] the program) rewritten as described
// above for the command tree cmds. A command line that names no command is
// returned unchanged.
func rewriteArgs(cmds []*cli.Command, args []string) []string {
	if len(args) < 2 {
		return args
	}
	out := []string{args[0]}
	rest := args[1:]
	var cmd *cli.Command
	for len(rest) > 0 {
		next := findCommand(cmds, rest[0])
		if next == nil {
			break
		}
		out = append(out, rest[0])
		rest = rest[1:]
		cmd = next
		cmds = cmd.Subcommands
	}
	if cmd == nil || cmd.SkipFlagParsing {
		return args
	}
	return append(out, reorderFlags(cmd, rest)...)
}

// findCommand is the command of cmds named or aliased name.
func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// reorderFlags puts cmd's flags before its positional arguments and maps the
// DeepSpeed and Hugging Face spellings (see above).
func reorderFlags(cmd *cli.Command, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			// A positional before -- stays before the ones after it.
			return append(append(append(flags, "--"), pos...), args[i+1:]...)
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			if cmd.Name == "launch" {
				// The ranks' command line: theirs to parse.
				return append(append(flags, pos...), args[i+1:]...)
			}
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		// nextValue is the following argument when it can be this flag's
		// value (it is not itself a flag).
		nextValue := func() (string, bool) {
			if i+1 < len(args) && (args[i+1] == "-" || !strings.HasPrefix(args[i+1], "-")) {
				return args[i+1], true
			}
			return "", false
		}
		switch {
		case name == "local_rank" || name == "local-rank":
			if !hasValue {
				if _, ok := nextValue(); ok {
					i++
				}
			}
			continue
		case name == "deepspeed" && hasFlag(cmd, "config"):
			if hasValue {
				if l := strings.ToLower(value); l != "true" && l != "false" {
					flags = append(flags, "--config="+value)
				}
				continue
			}
			if v, ok := nextValue(); ok && !isBoolWord(v) {
				flags = append(flags, "--config", v)
				i++
			} else if ok {
				i++ // --deepspeed true
			}
			continue
		case name == "resume_from_checkpoint" && hasFlag(cmd, "resume"):
			v, ok := value, hasValue
			if !ok {
				if v, ok = nextValue(); ok {
					i++
				}
			}
			switch strings.ToLower(v) {
			case "", "true":
				v = "auto"
			case "false":
				v = "never"
			}
			flags = append(flags, "--resume", v)
			continue
		}
		if isBoolFlag(cmd, name) {
			if hasValue {
				if b, ok := truthWord(value); ok {
					a = "--" + name + "=" + strconv.FormatBool(b)
				}
			} else if v, ok := nextValue(); ok {
				if b, ok := truthWord(v); ok {
					a = "--" + name + "=" + strconv.FormatBool(b)
					i++
				}
			}
		}
		flags = append(flags, a)
		if !hasValue && takesValue(cmd, name) {
			if i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
		}
	}
	return append(flags, pos...)
}

func isBoolWord(s string) bool {
	l := strings.ToLower(s)
	return l == "true" || l == "false"
}

// truthWord reads s as Hugging Face's string_to_bool does (yes, true, t, y,
// 1 / no, false, f, n, 0, in any case); ok is false for anything else.
func truthWord(s string) (value, ok bool) {
	switch strings.ToLower(s) {
	case "yes", "true", "t", "y", "1":
		return true, true
	case "no", "false", "f", "n", "0":
		return false, true
	}
	return false, false
}

// isBoolFlag reports whether cmd's flag name is a boolean.
func isBoolFlag(cmd *cli.Command, name string) bool {
	_, ok := lookupFlag(cmd, name).(*cli.BoolFlag)
	return ok
}

// hasFlag reports whether cmd has a flag called name (or aliased so).
func hasFlag(cmd *cli.Command, name string) bool { return lookupFlag(cmd, name) != nil }

func lookupFlag(cmd *cli.Command, name string) cli.Flag {
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// takesValue reports whether cmd's flag name reads the next argument as its
// value; unknown flags are taken not to, and urfave then names them.
func takesValue(cmd *cli.Command, name string) bool {
	f := lookupFlag(cmd, name)
	if f == nil {
		return false
	}
	tv, ok := f.(interface{ TakesValue() bool })
	return ok && tv.TakesValue()
}
