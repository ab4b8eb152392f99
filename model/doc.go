// Package model owns the GPT-2 family: size presets and Hugging Face
// config.json parsing, the flat parameter layout (every parameter in one
// buffer, one transformer block after another, so a ZeRO partition or a
// stage-3 gather is one (offset, length) range), deterministic random init,
// the forward and backward passes written as backend ops, and weight I/O
// (safetensors, Hugging Face GPT-2 names, llm.c .bin model files).
//
// Dimension key: B = batch size, T = sequence length, C = channels,
// NH = number of heads, L = number of layers, V = vocabulary size,
// Vp = V padded to a multiple of 128, maxT = the longest sequence (wpe rows).
//
// Host-side weights travel as []float32 in the flat layout (NumParams values);
// a Model copies them to and from its backend.
//
// config.json, llm.c headers and safetensors headers are untrusted: only
// regular files are opened (never blocking on a FIFO), every dimension is
// bounded by MaxDim and the parameter count by MaxParams before any count is
// formed, and no size read from a file is allocated before the file is known
// to hold it.
package model
