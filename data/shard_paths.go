package data

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gotrain/gotrain/internal/regularfile"
)

// ResolveShards expands shard paths and globs into a sorted, duplicate-free
// list of files. Lexical order of the full paths is the order llm.c reads
// shards in. A pattern that matches nothing is an error naming it.
func ResolveShards(patterns []string) ([]string, error) {
	if len(patterns) == 0 {
		return nil, fmt.Errorf("no token shards given: pass shard files or a glob such as data/train_*.bin")
	}
	var out []string
	for _, p := range patterns {
		if hasGlobMeta(p) {
			m, err := filepath.Glob(p)
			if err != nil {
				return nil, fmt.Errorf("shard pattern %q: %w", p, err)
			}
			if len(m) == 0 {
				return nil, fmt.Errorf("shard pattern %q matches no files", p)
			}
			for _, path := range m {
				if err := checkShardPath(path); err != nil {
					return nil, fmt.Errorf("shard pattern %q: %w", p, err)
				}
			}
			out = append(out, m...)
			continue
		}
		if err := checkShardPath(p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func hasGlobMeta(p string) bool {
	return strings.ContainsAny(p, "*?[")
}

// checkShardPath refuses a path that is not a regular file before anything
// opens it, so a FIFO given as data fails at once instead of blocking.
func checkShardPath(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("token shard: %w", err)
	}
	if st.IsDir() {
		return fmt.Errorf("token shard %s is a directory; give shard files or a glob such as %s",
			p, filepath.Join(p, "train_*.bin"))
	}
	if !st.Mode().IsRegular() {
		return regularfile.NotRegular("token shard", p, st.Mode())
	}
	return nil
}
