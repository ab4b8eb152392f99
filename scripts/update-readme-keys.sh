#!/bin/sh
# Regenerates the DeepSpeed keys table in README.md from `gotrain config keys`.
set -eu
cd "$(dirname "$0")/.."
go run ./cmd/gotrain config keys > /tmp/gotrain-keys.$$
awk -v table=/tmp/gotrain-keys.$$ '
	/<!-- keys:begin -->/ { print; while ((getline line < table) > 0) print line; skip = 1; next }
	/<!-- keys:end -->/ { skip = 0 }
	!skip { print }
' README.md > README.md.tmp
mv README.md.tmp README.md
rm -f /tmp/gotrain-keys.$$
