// Package config owns gotrain's reading of DeepSpeed JSON configs: parsing (JSON plus the comments and trailing
// commas DeepSpeed's hjson reader accepts), a typed home with DeepSpeed's code defaults for every key, deprecated
// key mapping, Hugging Face "auto" resolution from command-line overrides, the batch-size triangle, validation
// with key paths and concrete fixes, unknown-key suggestions, an explain dump, and config generation.
//
// The reference for every default and rule is DeepSpeed's code (not its docs, which differ in places; see
// KeysMarkdown). One table (keys.go) lists every key with its default and gotrain status; parsing, unknown-key
// detection, Explain and the README table all come from it.
//
// Typical use:
//
//	cfg, err := config.Load("ds_config.json", config.Options{Strict: true, Overrides: ov})
//	if err != nil { ... }            // err is a config.Errors listing every problem with file, key path and fix
//	for _, w := range cfg.Warnings { ... }
//	batch, err := cfg.Resolve(worldSize)
//
// Functions are safe for concurrent use; a Config is a plain value owned by its caller.
package config
