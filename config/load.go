package config

import (
	"sort"

	"github.com/gotrain/gotrain/internal/regularfile"
)

// Options controls how a config file is read.
type Options struct {
	// Strict makes unknown keys errors. When false they are warnings and ignored (the CLI's
	// --allow-unknown-keys); other errors stay errors either way.
	Strict bool
	// Overrides fill "auto" keys and are checked against explicit ones; see Overrides.
	Overrides Overrides
}

// maxConfigBytes bounds a DeepSpeed config file: real ones are a few KB.
const maxConfigBytes = 16 << 20

// ReadFile reads a config file of any kind gotrain takes (DeepSpeed JSON,
// Accelerate YAML, FSDP JSON) as Load does: a regular file of at most
// 16 MiB, never blocking on a named pipe.
func ReadFile(path string) ([]byte, error) {
	return regularfile.Read("config", path, maxConfigBytes)
}

// Load reads and checks the DeepSpeed config at path; see Parse. Only a
// regular file is read: a named pipe would block the open until a writer
// appears and a device such as /dev/zero never ends, so each is refused by
// name, and the open itself never blocks.
func Load(path string, opts Options) (*Config, error) {
	data, err := regularfile.Read("DeepSpeed config", path, maxConfigBytes)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, opts)
}

// Parse checks a DeepSpeed config held in memory; file names it in messages. It maps deprecated keys, fills
// "auto" keys from opts.Overrides, validates every key and the combinations DeepSpeed checks, and, when
// opts.Overrides.WorldSize is set, resolves the batch triangle. All problems are collected: the error, when
// not nil, is an Errors holding every one of them. A syntax error stops parsing and returns a nil Config;
// otherwise the Config is returned even with errors so that its Warnings can be shown, but it must not be
// used to train.
func Parse(file string, data []byte, opts Options) (*Config, error) {
	root, perrs := parseTree(file, data)
	if root == nil {
		return nil, perrs
	}
	d := newDecoder(file, opts)
	d.errs = append(d.errs, perrs...)
	d.mapDeprecated(root)
	d.block("", root, false)
	d.resolveAutos()
	d.hfSchedule()
	d.checkOverrides()
	c := d.build()
	d.validate(c)
	c.unsupported = d.unsupported(c)
	d.warnUnsupported(c.unsupported)
	if ws := opts.Overrides.WorldSize; ws > 0 {
		if _, err := c.Resolve(ws); err != nil {
			if es, ok := err.(Errors); ok {
				d.errs = append(d.errs, es...)
			}
		}
	} else {
		d.errs = append(d.errs, c.checkBatchKeys()...)
	}
	sortErrors(d.errs)
	sort.SliceStable(d.warns, func(i, j int) bool {
		a, b := d.warns[i], d.warns[j]
		if (a.Line == 0) != (b.Line == 0) {
			return a.Line != 0
		}
		return a.Line < b.Line
	})
	c.Warnings = d.warns
	if len(d.errs) > 0 {
		return c, d.errs
	}
	return c, nil
}
