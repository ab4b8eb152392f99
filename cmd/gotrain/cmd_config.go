package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/model"
)

// configCommand is `gotrain config`: validate, explain and generate DeepSpeed JSON configs.
func configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "check, explain or generate a DeepSpeed JSON config",
		Description: "gotrain reads the DeepSpeed config files people already have (JSON with // and # comments and\n" +
			"trailing commas, as DeepSpeed's hjson reader accepts). These commands check a file the way DeepSpeed\n" +
			"would, but report every problem at once with its key path and a fix, print every resolved value,\n" +
			"or write a new config.",
		Subcommands: []*cli.Command{cfgValidateCommand(), cfgExplainCommand(), cfgGenerateCommand(), cfgImportCommand(), cfgKeysCommand()},
	}
}

func cfgAllowUnknownFlag() cli.Flag {
	return &cli.BoolFlag{
		Name:  "allow-unknown-keys",
		Usage: "report likely typos and unknown keys in the sections DeepSpeed checks strictly as warnings (naming the key meant and the value it keeps) instead of failing",
	}
}

func cfgStepsFlag() cli.Flag {
	return &cli.IntFlag{
		Name:        "max-steps",
		Aliases:     []string{"steps"},
		Usage:       "optimizer steps of the run, as given to train: fills scheduler total_num_steps when it is \"auto\" or missing",
		DefaultText: fmt.Sprintf("left to the run (train's default, %d, is assumed for the checks)", config.DefaultMaxSteps),
	}
}

// cfgArgs is a config subcommand's command line with flags also accepted after the FILE argument, as in
// `gotrain config validate FILE --nproc 4`: urfave/cli v2 stops reading flags at the first argument, so the
// rest is parsed here against the command's own flag definitions.
type cfgArgs struct {
	c    *cli.Context
	late map[string]string // primary flag name → value given after the first argument
	pos  []string          // positional arguments
}

// cfgParseArgs returns the parsed command line, or nil when help was asked for after the argument (and shown).
func cfgParseArgs(c *cli.Context) (*cfgArgs, error) {
	a := &cfgArgs{c: c, late: map[string]string{}}
	args := c.Args().Slice()
	if len(args) <= 1 {
		a.pos = args
		return a, nil
	}
	set := flag.NewFlagSet(c.Command.Name, flag.ContinueOnError)
	set.SetOutput(io.Discard)
	primary := map[string]string{}
	for _, f := range c.Command.Flags {
		if err := f.Apply(set); err != nil {
			return nil, err
		}
		for _, n := range f.Names() {
			primary[n] = f.Names()[0]
		}
	}
	a.pos = []string{args[0]}
	for rest := args[1:]; len(rest) > 0; {
		if err := set.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, cli.ShowSubcommandHelp(c)
			}
			return nil, fmt.Errorf("config %s: %w", c.Command.Name, err)
		}
		rest = set.Args()
		if len(rest) > 0 {
			a.pos = append(a.pos, rest[0])
			rest = rest[1:]
		}
	}
	set.Visit(func(f *flag.Flag) { a.late[primary[f.Name]] = f.Value.String() })
	if a.Bool("help") {
		return nil, cli.ShowSubcommandHelp(c)
	}
	return a, nil
}

// IsSet, Int, Float64, Bool and String read a flag given before or after FILE (flagValues).
func (a *cfgArgs) IsSet(name string) bool {
	_, ok := a.late[name]
	return ok || a.c.IsSet(name)
}

func (a *cfgArgs) Int(name string) int {
	if v, ok := a.late[name]; ok {
		if i, err := strconv.Atoi(v); err == nil {
			return i
		}
	}
	return a.c.Int(name)
}

func (a *cfgArgs) Bool(name string) bool {
	if v, ok := a.late[name]; ok {
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
	}
	return a.c.Bool(name)
}

func (a *cfgArgs) Float64(name string) float64 {
	if v, ok := a.late[name]; ok {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
	}
	return a.c.Float64(name)
}

func (a *cfgArgs) String(name string) string {
	if v, ok := a.late[name]; ok {
		return v
	}
	return a.c.String(name)
}

// cfgLoad reads FILE (the one positional argument) with the flags shared by validate and explain.
func cfgLoad(a *cfgArgs, worldSize int) (string, *config.Config, error) {
	c := a.c
	if len(a.pos) != 1 {
		return "", nil, fmt.Errorf("config %s: expected one config FILE argument, got %d", c.Command.Name, len(a.pos))
	}
	file := a.pos[0]
	opts := config.Options{Strict: !a.Bool("allow-unknown-keys")}
	opts.Overrides.WorldSize = worldSize
	if err := autoOverrides(a, &opts.Overrides); err != nil {
		return file, nil, err
	}
	cfg, err := cfgLoadAny(c, file, opts)
	if cfg != nil {
		cfgPrintWarnings(c.App.ErrWriter, cfg.Warnings)
	}
	if err != nil {
		var list config.Errors
		if errors.As(err, &list) {
			// Every problem goes to stderr with its position and fix; the returned error only summarises.
			for _, e := range list {
				fmt.Fprintln(c.App.ErrWriter, e.Error())
			}
			return file, nil, fmt.Errorf("%s: %d problem(s) found", file, len(list))
		}
		return file, nil, err
	}
	return file, cfg, nil
}

// cfgLoadAny loads a DeepSpeed config, or converts an Accelerate or FSDP
// config first, saying what the file is and what was left out.
func cfgLoadAny(c *cli.Context, file string, opts config.Options) (*config.Config, error) {
	data, err := config.ReadFile(file)
	if err != nil || !config.IsForeign(data) {
		return config.Load(file, opts)
	}
	im, err := config.ImportFile(file)
	if err != nil {
		return nil, err
	}
	cfgImportReport(c.App.ErrWriter, im)
	fmt.Fprintf(c.App.ErrWriter, "checking the DeepSpeed config it converts to (gotrain config import %s --output ds.json writes it)\n", file)
	return config.Parse(file+" (converted)", im.DeepSpeed, opts)
}

func cfgPrintWarnings(w io.Writer, warns []config.Warning) {
	for _, wn := range warns {
		fmt.Fprintln(w, wn.String())
	}
}

func cfgValidateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check a DeepSpeed config and report every problem with its key path and a fix",
		ArgsUsage: "FILE",
		Description: "Parses FILE, maps deprecated keys, checks every key, type and range, the combinations DeepSpeed\n" +
			"rejects, and unknown keys (with the closest known key). With --nproc it also resolves the batch sizes\n" +
			"(train_batch_size = micro batch × gradient accumulation × world size) as DeepSpeed would.\n" +
			"Prints warnings, then \"FILE: OK\" or the errors; exits non-zero on errors.",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "nproc", Usage: "data-parallel world size to check the batch sizes for (not checked when omitted)"},
			cfgAllowUnknownFlag(),
			cfgStepsFlag(),
		}, autoFlags()...),
		Action: func(c *cli.Context) error {
			a, err := cfgParseArgs(c)
			if a == nil || err != nil {
				return err
			}
			ws := 0
			if a.IsSet("nproc") {
				ws = a.Int("nproc")
				if ws < 1 {
					return fmt.Errorf("config validate: --nproc must be at least 1, got %d", ws)
				}
			}
			file, _, err := cfgLoad(a, ws)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.App.Writer, "%s: OK\n", file)
			return err
		},
	}
}

func cfgExplainCommand() *cli.Command {
	return &cli.Command{
		Name:      "explain",
		Usage:     "print every resolved value of a DeepSpeed config and the batch sizes it gives",
		ArgsUsage: "FILE",
		Description: "Prints every key gotrain knows, grouped by block, with its resolved value, marking values that come\n" +
			"from DeepSpeed's defaults, from \"auto\", from deprecated keys or from inference, and keys gotrain ignores\n" +
			"or does not support. Then the batch sizes for --nproc ranks and, with --seq-len, the tokens per step.\n" +
			"Values only the run knows (\"auto\" total_num_steps without --max-steps, the batch sizes without --nproc,\n" +
			"bucket sizes that follow the model's width) read \"auto → filled at run time from ...\"; they are not errors.\n" +
			"The flags that fill \"auto\" in train (--bf16, --micro-batch-size, --lr, --lr-scheduler-type, ...) fill it\n" +
			"here the same way, so the summary describes the run train starts.",
		Flags: append(append([]cli.Flag{
			&cli.IntFlag{Name: "nproc", DefaultText: "the run's", Usage: "data-parallel world size (number of ranks); without it the batch sizes that depend on it read \"filled at run time\""},
			&cli.IntFlag{Name: "seq-len", Usage: "sequence length T, to print tokens per optimizer step"},
			&cli.BoolFlag{Name: "non-default", Aliases: []string{"non_default"}, Usage: "print only the keys whose value differs from DeepSpeed's default (the batch sizes, optimizer, scheduler and summary always)"},
			&cli.BoolFlag{Name: "gradient-checkpointing", Aliases: []string{"gradient_checkpointing"}, Usage: "the run's --gradient-checkpointing, for the summary"},
			cfgAllowUnknownFlag(),
			cfgStepsFlag(),
		}, autoFlags()...), loraFlags(false)...),
		Action: func(c *cli.Context) error {
			a, err := cfgParseArgs(c)
			if a == nil || err != nil {
				return err
			}
			ws := a.Int("nproc")
			if a.IsSet("nproc") && ws < 1 {
				return fmt.Errorf("config explain: --nproc must be at least 1, got %d", ws)
			}
			seqLen := a.Int("seq-len")
			if seqLen < 0 {
				return fmt.Errorf("config explain: --seq-len must not be negative, got %d", seqLen)
			}
			_, cfg, err := cfgLoad(a, ws)
			if err != nil {
				return err
			}
			lora, err := loraConfig(c)
			if err != nil {
				return err
			}
			return config.ExplainWith(c.App.Writer, cfg, config.ExplainOptions{WorldSize: ws, SeqLen: seqLen,
				NonDefault: a.Bool("non-default"), Checkpointing: a.Bool("gradient-checkpointing"), Trained: loraWords(lora)})
		},
	}
}

func cfgGenerateCommand() *cli.Command {
	return &cli.Command{
		Name:  "generate",
		Usage: "write a new DeepSpeed config for a ZeRO stage, offload and precision",
		Description: "Writes a config shaped like the common Hugging Face examples: the micro batch, gradient accumulation\n" +
			"(unless given) and clipping are \"auto\", filled by the train flags; stage 3 bucket sizes are \"auto\",\n" +
			"filled from the model width. The output always passes `gotrain config validate`.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "zero_stage", Aliases: []string{"zero-stage"}, Usage: "ZeRO stage: 0 (off), 1, 2 or 3", Required: true},
			&cli.BoolFlag{Name: "offload_optimizer", Aliases: []string{"offload-optimizer"}, Usage: "keep optimizer states and master weights in CPU memory (stages 1-3)"},
			&cli.BoolFlag{Name: "offload_param", Aliases: []string{"offload-param"}, Usage: "keep parameters in CPU memory (stage 3)"},
			&cli.BoolFlag{Name: "bf16", Usage: "bf16 mixed precision"},
			&cli.BoolFlag{Name: "fp16", Usage: "fp16 mixed precision with dynamic loss scaling"},
			&cli.IntFlag{Name: "gradient_accumulation_steps", Aliases: []string{"gradient-accumulation-steps"}, Usage: "micro-steps per optimizer step (default: \"auto\")"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "file to write, or - for standard output", Required: true},
			&cli.BoolFlag{Name: "force", Usage: "overwrite the output file if it exists"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("config generate: unexpected argument %q (the file is given with --output)", c.Args().First())
			}
			if c.Bool("bf16") && c.Bool("fp16") {
				return errors.New("config generate: --bf16 and --fp16 cannot both be given")
			}
			opts := config.GenerateOptions{
				ZeroStage:        c.Int("zero_stage"),
				OffloadOptimizer: c.Bool("offload_optimizer"),
				OffloadParam:     c.Bool("offload_param"),
				GradAccum:        c.Int("gradient_accumulation_steps"),
			}
			if c.IsSet("gradient_accumulation_steps") && opts.GradAccum < 1 {
				return fmt.Errorf("config generate: --gradient_accumulation_steps must be at least 1, got %d", opts.GradAccum)
			}
			switch {
			case c.Bool("bf16"):
				opts.Precision = "bf16"
			case c.Bool("fp16"):
				opts.Precision = "fp16"
			}
			data, err := config.Generate(opts)
			if err != nil {
				return err
			}
			out := c.String("output")
			if out == "-" {
				_, err := c.App.Writer.Write(data)
				return err
			}
			if err := cfgWriteFile(out, data, c.Bool("force")); err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.App.ErrWriter, "wrote %s\n", out)
			return err
		},
	}
}

func cfgKeysCommand() *cli.Command {
	return &cli.Command{
		Name:  "keys",
		Usage: "print every DeepSpeed key gotrain knows as a Markdown table (default, status, notes)",
		Description: "Prints the table that drives parsing: each key path, DeepSpeed's code default, and whether gotrain\n" +
			"supports it, accepts and ignores it, or does not support it yet. docs/deepspeed-keys.md is this output.",
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("config keys: unexpected argument %q", c.Args().First())
			}
			_, err := io.WriteString(c.App.Writer, config.KeysMarkdown())
			return err
		},
	}
}

// cfgWriteFile writes data to path; without force an existing file is an error rather than overwritten.
func cfgWriteFile(path string, data []byte, force bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if !force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("config generate: %s already exists; pass --force to overwrite it", path)
	}
	if err != nil {
		return fmt.Errorf("config generate: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("config generate: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("config generate: close %s: %w", path, err)
	}
	return nil
}

// loraWords says what a LoRA run trains, for config explain's summary; ""
// without LoRA (every parameter trains).
func loraWords(l *model.LoRA) string {
	if l == nil {
		return ""
	}
	return fmt.Sprintf("LoRA adapters r=%d, lora_alpha %g (scale %g) on %s; the base model frozen",
		l.R, l.Alpha, l.Scale(), strings.Join(l.Target, ","))
}
