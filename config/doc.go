// Package config owns gotrain's reading of DeepSpeed JSON configs: parsing (JSON plus the comments and trailing
// commas DeepSpeed's hjson reader accepts), a typed home with DeepSpeed's code defaults for every key, deprecated
// key mapping, Hugging Face "auto" resolution from command-line overrides, the batch-size triangle, validation
// with key paths and concrete fixes, unknown-key suggestions, an explain dump, and config generation.
//
// The reference for every default and rule is DeepSpeed's code (not its docs, which differ in places; see
// KeysMarkdown). One table (keys.go) lists every key with its default and gotrain status; parsing, unknown-key
// detection, Explain and the keys table (docs/deepspeed-keys.md) all come from it.
//
// # Unknown keys
//
// DeepSpeed's own behaviour depends on the section. It reads the top level and the fp16, bf16,
// activation_checkpointing, flops_profiler, checkpoint, optimizer and scheduler blocks with dict.get
// (get_scalar_param in deepspeed/runtime/config_utils.py), so an unknown key there is silently ignored. Its
// pydantic sections (zero_optimization with offload_optimizer and offload_param in deepspeed/runtime/zero/config.py,
// the monitors tensorboard, wandb, csv_monitor and comet in deepspeed/monitor/config.py, comms_logger, timers) derive
// from DeepSpeedConfigModel, whose model_config sets extra="forbid" (deepspeed/runtime/config_utils.py): an unknown
// key there fails with "Extra inputs are not permitted". Optimizer and scheduler params are passed to the
// constructors as keyword arguments (FusedAdam(..., **params), WarmupLR(optimizer, **params)), so an unknown one is
// a TypeError. gotrain follows that, but safer:
//
//   - an unknown key where DeepSpeed ignores it is a warning naming the closest known key;
//   - an unknown key where DeepSpeed refuses it (the sections above) is an error;
//   - a likely typo (a known key of the same block within a small edit distance, see suggest) or a known key
//     written in the wrong block is an error anywhere, since DeepSpeed would silently train with the default;
//   - with --allow-unknown-keys (Options.Strict false) each of these is a warning instead, and the warning for a
//     typo names both keys and what the intended key is left with ("bf16.enabled keeps its default, false"), so
//     a misspelled key never falls back to a default unannounced.
//
// # Values only the run knows
//
// An "auto" total_num_steps without a run length, an "auto" bucket size without the model, and batch sizes
// without a world size are not errors: validate and explain check them with what the run takes by default
// (DefaultMaxSteps, DeepSpeed's code defaults) and show them as "auto → filled at run time from ..." (FromRunTime).
//
// # Other tools' configs
//
// Import converts an Accelerate config (YAML, distributed_type DEEPSPEED or FSDP) or a PyTorch FSDP config (JSON
// or YAML) into a DeepSpeed config, listing the settings it has no equivalent for and why.
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
