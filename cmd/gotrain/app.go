package main

import (
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

// Version is set at build time with -ldflags "-X main.Version=v0.1.0".
var Version = "dev"

// newApp builds a fresh command tree writing to stdout and stderr, so tests can
// run commands in-process.
func newApp(stdout, stderr io.Writer) *cli.App {
	cmds := commands()
	setUsageErrors(cmds)
	return &cli.App{
		Name:  "gotrain",
		Usage: "train GPT-family models data-parallel with ZeRO 0-3 from a DeepSpeed JSON config",
		UsageText: "gotrain --config ds_config.json [train flags]   (same as: gotrain train --config ...)\n" +
			"gotrain <command> [flags] [args]",
		Description: "gotrain is one binary: it reads the DeepSpeed JSON config you already have, checks it more\n" +
			"strictly than DeepSpeed (typos are errors with suggestions), and trains on CPU ranks or GPUs.\n" +
			"Run 'gotrain <command> --help' for a command's flags.",
		Version:              Version,
		Writer:               stdout,
		ErrWriter:            stderr,
		EnableBashCompletion: true,
		Suggest:              true,
		Commands:             cmds,
		OnUsageError:         usageError,
		// Errors, exit codes included, are printed and turned into the exit
		// status by main; urfave's default handler would exit mid-Run.
		ExitErrHandler: func(*cli.Context, error) {},
	}
}

// normalizeArgs makes `gotrain --config X ...` mean `gotrain train --config X ...`:
// when the first argument is a flag other than the app's own help/version
// flags, the train command is implied. Then the DeepSpeed and Hugging Face
// spellings are mapped and flags after arguments moved (argv.go).
func normalizeArgs(args []string) []string {
	return rewriteArgs(commands(), impliedTrain(args))
}

func impliedTrain(args []string) []string {
	if len(args) < 2 || !strings.HasPrefix(args[1], "-") {
		return args
	}
	switch args[1] {
	case "-h", "--help", "-help", "-v", "--version", "-version", "--generate-bash-completion":
		return args
	}
	out := make([]string, 0, len(args)+1)
	out = append(out, args[0], "train")
	return append(out, args[1:]...)
}

// commands lists every subcommand, one file each, with the Hugging Face
// names of their flags (compat_flags.go). Commands that take no positional
// argument refuse one.
func commands() []*cli.Command {
	return withHFNames([]*cli.Command{
		refuseArgs(withFlags(trainCommand(), append(autoFlags(), memoryCheckFlags()...)...)),
		sampleCommand(),
		configCommand(),
		refuseArgs(withFlags(estimateCommand(), append(autoFlags(), estimateMemoryFlags()...)...)),
		plotCommand(),
		checkpointCommand(),
		dataCommand(),
		tokenizeCommand(),
		withFlags(launchCommand(), launchCompatFlags()...),
		slurmCommand(),
		refuseArgs(withFlags(doctorCommand(), append(doctorCommFlags(), append(doctorSelftestFlags(), doctorE2EFlags()...)...)...)),
		refuseArgs(benchCommand()),
		refuseArgs(versionCommand()),
	})
}

// withFlags adds flags to cmd: the flags shared between commands
// (compat_flags.go) live beside the command rather than in its list.
func withFlags(cmd *cli.Command, flags ...cli.Flag) *cli.Command {
	cmd.Flags = append(cmd.Flags, flags...)
	return cmd
}
