package main

import (
	"os"
	"path/filepath"
)

// checkpointsDir is the checkpoints directory dir names: dir itself, or,
// for a run's --output-dir (which holds checkpoints/ but no "latest" or tag
// of its own), dir/checkpoints. Users point at the run, as DeepSpeed users
// point at the directory they passed to save_checkpoint.
func checkpointsDir(dir string) string {
	if _, err := os.Stat(filepath.Join(dir, "latest")); err == nil {
		return dir
	}
	if tags, _ := filepath.Glob(filepath.Join(dir, "global_step*")); len(tags) > 0 {
		return dir
	}
	sub := filepath.Join(dir, "checkpoints")
	if st, err := os.Stat(sub); err == nil && st.IsDir() {
		return sub
	}
	return dir
}
