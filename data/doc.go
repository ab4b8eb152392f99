// Package data owns everything between text on disk and the token batches a
// training step consumes:
//
//   - the token shard format of llm.c (shard_format.go): a 1024-byte header of
//     256 little-endian int32 (magic 20240520, version 1, token count) followed
//     by uint16 tokens, plus the Llama-3 variant (magic 20240801, version 7,
//     uint32 tokens); modded-nanogpt shards are the 20240520 format as they are;
//     gotrain's writer also records the largest token id in header words 3-5,
//     which llm.c ignores;
//   - streaming shard readers and an atomic shard writer;
//   - the per-rank Loader in llm.c's order (rank r of N reads the r-th chunk of
//     B·T tokens of every group of N chunks) with resumable position state, and
//     an EvalLoader that walks the validation split from its start; both check
//     every token id of every shard against the model's vocabulary when built;
//   - tokenizers (GPT-2 BPE, offline; raw bytes; a Hugging Face
//     tokenizer.json, read by the sub-package hftok) behind one interface,
//     and the tokenizer.json file that names the tokenizer of a prepared
//     directory (gotrain's record, or a copy of the Hugging Face files);
//   - Prepare, which turns .txt and .jsonl documents into train and val
//     shards, uint32 ones when the vocabulary exceeds 65,535 ids.
//
// Dimension key: B = micro-batch size, T = sequence length, N = number of
// ranks (world size), r = this rank. One micro-batch is B·T+1 consecutive
// tokens: inputs are tokens [0, B·T) and targets tokens [1, B·T+1).
//
// Shards, tokenizer.json and documents are untrusted input: only regular
// files are opened (a FIFO or a device is refused by name, never blocked on),
// and no size read from a file is allocated before the file is known to
// hold it.
//
// The package imports no other gotrain package but its own hftok (and the
// internal file helpers). Loaders and shard writers are not safe for
// concurrent use; tokenizers are.
package data
