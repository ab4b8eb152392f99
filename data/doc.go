// Package data owns everything between text on disk and the token batches a
// training step consumes:
//
//   - the token shard format of llm.c (shard_format.go): a 1024-byte header of
//     256 little-endian int32 (magic 20240520, version 1, token count) followed
//     by uint16 tokens, plus the Llama-3 variant (magic 20240801, version 7,
//     uint32 tokens); modded-nanogpt shards are the 20240520 format as they are;
//   - streaming shard readers and an atomic shard writer;
//   - the per-rank Loader in llm.c's order (rank r of N reads the r-th chunk of
//     B·T tokens of every group of N chunks) with resumable position state, and
//     an EvalLoader that walks the validation split from its start;
//   - tokenizers (GPT-2 BPE, offline; raw bytes) behind one interface, and the
//     tokenizer.json file that names the tokenizer of a prepared directory;
//   - Prepare, which turns .txt and .jsonl documents into train and val shards.
//
// Dimension key: B = micro-batch size, T = sequence length, N = number of
// ranks (world size), r = this rank. One micro-batch is B·T+1 consecutive
// tokens: inputs are tokens [0, B·T) and targets tokens [1, B·T+1).
//
// The package imports no other gotrain package. Loaders and shard writers are
// not safe for concurrent use; tokenizers are.
package data
