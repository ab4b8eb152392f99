#!/bin/sh
# Regenerates the DeepSpeed keys table in docs/deepspeed-keys.md (between the
# keys:begin and keys:end markers) from `gotrain config keys`.
set -eu
cd "$(dirname "$0")/.."
doc=docs/deepspeed-keys.md
go run ./cmd/gotrain config keys > /tmp/gotrain-keys.$$
awk -v table=/tmp/gotrain-keys.$$ '
	/<!-- keys:begin -->/ { print; while ((getline line < table) > 0) print line; skip = 1; next }
	/<!-- keys:end -->/ { skip = 0 }
	!skip { print }
' "$doc" > "$doc.tmp"
mv "$doc.tmp" "$doc"
rm -f /tmp/gotrain-keys.$$
