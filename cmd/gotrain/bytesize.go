package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// parseByteSize reads a size as --max-shard-size (transformers'
// max_shard_size), --gpu-memory and $GOTRAIN_MEM_AVAILABLE take it: a
// number with an optional unit, B, KB, MB, GB, TB in powers of 1000, KiB,
// MiB, GiB, TiB in powers of 1024, and K, M, G, T as the binary ones, as
// nvidia-smi and Slurm mean them. A whole number of bytes reads exactly
// (with or without one leading +); a fraction must come to at least one
// byte.
func parseByteSize(s string) (int64, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "+") // one plus sign, as strconv reads numbers
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	mult, ok := map[string]int64{"": 1, "b": 1,
		"k": 1 << 10, "kib": 1 << 10, "kb": 1e3, "m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
		"g": 1 << 30, "gib": 1 << 30, "gb": 1e9, "t": 1 << 40, "tib": 1 << 40, "tb": 1e12}[strings.ToLower(unit)]
	bad := fmt.Errorf("%q is not a size; write a positive number of bytes, optionally with a unit, e.g. 5GB, 48GiB or 512G", s)
	if !ok || num == "" {
		return 0, bad
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n < 1 || n > math.MaxInt64/mult {
			return 0, bad
		}
		return n * mult, nil
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || !(v*float64(mult) >= 1) || v*float64(mult) > math.MaxInt64/2 {
		return 0, bad
	}
	return int64(v * float64(mult)), nil
}
