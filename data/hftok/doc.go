// Package hftok reads a Hugging Face tokenizer.json (and the
// tokenizer_config.json beside it) natively and encodes and decodes text the
// way Hugging Face's tokenizers library does, for the byte-level BPE
// tokenizers of GPT-2, Qwen2/Qwen3 and Llama 3.
//
// The encode pipeline is the library's (tokenizer/mod.rs): added tokens are
// cut out of the raw text first (leftmost-longest, with their single_word,
// lstrip and rstrip rules) and become their ids; every other piece is
// normalized (NFC), cut again on added tokens that match normalized text,
// pre-tokenized (Split with the Qwen2/Qwen3, Llama 3 or GPT-2 pattern,
// ByteLevel, Sequence), and each pre-token is merged by rank-ordered BPE over
// its UTF-8 bytes; the post-processor (TemplateProcessing, Roberta, Bert)
// adds BOS/EOS only when asked. Decoding is the ByteLevel decoder: token
// strings back to bytes, then UTF-8 with each maximal invalid subsequence
// replaced by U+FFFD.
//
// What it does not read is refused when the file is loaded, with an error
// that names the component: other models (WordPiece, Unigram), byte_fallback,
// BPE dropout, normalizers other than NFC, and Split patterns other than the
// three above. The patterns use a lookahead that Go's regexp lacks; they are
// implemented by a scanner (scan.go) written for exactly these patterns,
// which the tests check against a backtracking regex engine.
//
// tokenizer.json is untrusted input: sizes are bounded, every reference
// (merge parts, added-token and template ids) is checked against the
// vocabulary, and a bad file is an error naming the field, never a panic.
//
// A Tokenizer is immutable after Load and safe for concurrent use; its
// pre-token cache is shared by all callers.
package hftok
