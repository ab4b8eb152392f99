#!/bin/sh
# Only the packages that wrap native libraries may use cgo (docs/architecture.md §2):
# csrc-using packages cuda, cublas, nccl, kernels (and kernels/emu) and blas.
set -eu
allowed='^\./(cuda|cublas|nccl|kernels|kernels/emu|blas)$'
bad=0
for f in $(git ls-files '*.go'); do
	if grep -q '^import "C"' "$f" || grep -Eq '^[[:space:]]*"C"$' "$f"; then
		dir=./$(dirname "$f")
		if ! echo "$dir" | grep -Eq "$allowed"; then
			echo "cgo not allowed in $dir ($f): only cuda, cublas, nccl, kernels, kernels/emu and blas may import \"C\""
			bad=1
		fi
	fi
done
exit $bad
