// Package didyoumean finds the name someone probably meant: a DeepSpeed
// config key or a command-line flag typed with other separators, another
// case, or a typo. A name equal to a candidate once case and separators are
// folded ("save-steps", "SaveSteps" for save_steps) always wins over one a
// few edits away, so a Hugging Face spelling finds its twin before a
// look-alike.
//
// It is internal because config, the trainer's stages file and the command
// line all need it.
package didyoumean

import (
	"strings"
	"unicode/utf8"
)

// Normalize folds case and drops separators so that "ZeroOptimization", "zero-optimization" and
// "zero_optimization" compare equal.
func Normalize(s string) string {
	var sb strings.Builder
	for _, r := range strings.ToLower(s) {
		if r == '_' || r == '-' || r == ' ' || r == '.' {
			continue
		}
		sb.WriteRune(r)
	}
	return sb.String()
}

// Distance is the optimal-string-alignment form of the Damerau–Levenshtein distance: insertions, deletions,
// substitutions and transpositions of adjacent characters each cost 1. Transpositions matter because the typical
// typo swaps two neighbouring letters ("optimziation").
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	n, m := len(ra), len(rb)
	if n == 0 {
		return m
	}
	if m == 0 {
		return n
	}
	// Three rolling rows: the transposition case looks two rows back.
	prev2 := make([]int, m+1)
	prev := make([]int, m+1)
	cur := make([]int, m+1)
	for j := 0; j <= m; j++ {
		prev[j] = j
	}
	for i := 1; i <= n; i++ {
		cur[0] = i
		for j := 1; j <= m; j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			best := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				best = min(best, prev2[j-2]+1)
			}
			cur[j] = best
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[m]
}

// Suggest returns the candidate closest to key, or "" when none is close enough to be a plausible typo.
// An exact match after case/separator folding wins; otherwise the smallest edit distance on the folded forms,
// allowed up to a third of the key's length (at most 4), so that short keys do not match everything.
func Suggest(key string, candidates []string) string {
	nk := Normalize(key)
	for _, c := range candidates {
		if Normalize(c) == nk {
			return c
		}
	}
	best, bestD := "", 1<<30
	for _, c := range candidates {
		nc := Normalize(c)
		// The distance is at least the length difference, and anything over 4
		// is never suggested: skipping those keeps hostile keys (fuzzed, or
		// megabytes long) from costing quadratic time.
		if d := len(nk) - len(nc); d > 4 || d < -4 {
			continue
		}
		d := Distance(nk, nc)
		if d < bestD {
			best, bestD = c, d
		}
	}
	limit := min(max(utf8.RuneCountInString(nk)/3, 1), 4)
	if best != "" && bestD <= limit {
		return best
	}
	// A key that is a clear fragment or extension of a known key ("reduce_bucket" for "reduce_bucket_size").
	if len(nk) >= 6 {
		for _, c := range candidates {
			nc := Normalize(c)
			if strings.Contains(nc, nk) || (strings.Contains(nk, nc) && len(nc) >= 6) {
				return c
			}
		}
	}
	return ""
}

// Nearest returns the candidate nearest to key by edit distance on the folded forms, however far: a warning
// about a name that is no typo can still point at the nearest one known.
func Nearest(key string, candidates []string) string {
	nk := Normalize(key)
	if len(nk) > 256 {
		return "" // a hostile key: not worth a quadratic comparison
	}
	best, bestD := "", 1<<30
	for _, c := range candidates {
		if d := Distance(nk, Normalize(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}
