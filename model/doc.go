// Package model owns the decoder family gotrain trains — GPT-2, Llama,
// Mistral, Qwen2 and Qwen3 — described by data, not by code paths: a
// Config (from a preset — GPT-2 shapes and the published Llama-family
// models, presets.go — or a Hugging Face config.json) says which
// norm, activation, positions, biases, head and shape a model has; the
// flat parameter layout (every parameter in one buffer, one block after
// another, so a ZeRO partition or a stage-3 gather is one (offset, length)
// range) and its parameter groups and acquisition order follow from it;
// one forward and backward pass, written as backend ops, runs every
// member. The package also owns deterministic random init and weight I/O:
// safetensors, Hugging Face snapshots in (single-file or sharded, F32,
// BF16 or F16, read by range) and out (ExportSnapshot: sharded as
// transformers shards, streamed tensor by tensor), GPT-2's Hugging Face
// names and llm.c .bin files.
//
// Dimension key: B = batch size, T = sequence length, C = channels (hidden
// size), NH = query heads, KV = key/value heads, HD = head size, FF = MLP
// width, L = number of layers, V = vocabulary size, Vp = V padded to a
// multiple of 128 (GPT-2; V for the Llama family), maxT = the longest
// sequence.
//
// Host-side weights travel as []float32 in the flat layout (NumParams values);
// a Model copies them to and from its backend.
//
// config.json, model.safetensors.index.json, llm.c headers and safetensors
// headers are untrusted: only regular files are opened (never blocking on a
// FIFO), every dimension is bounded by MaxDim and the parameter count by
// MaxParams before any count is formed, shard names must be plain file
// names in the snapshot, and no size read from a file is allocated before
// the file is known to hold it.
package model
