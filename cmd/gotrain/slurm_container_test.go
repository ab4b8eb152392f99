package main

import (
	"os"
	"strings"
	"testing"
)

// TestSlurmGenerateMatchesEnrootRecipe: slurm generate with Pyxis's
// container options writes the srun line of the README's Enroot recipe
// (plus --kill-on-bad-exit=1), running the image's gotrain; the container
// options without an image are refused.
func TestSlurmGenerateMatchesEnrootRecipe(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, recipe, ok := strings.Cut(string(readme), "\nsrun --container-image=")
	if !ok {
		t.Fatal("README has no srun --container-image recipe")
	}
	recipe, _, _ = strings.Cut(recipe, "\n```")
	recipe = "srun --container-image=" + strings.Join(strings.Fields(strings.ReplaceAll(recipe, "\\\n", " ")), " ")
	want := strings.Replace(recipe, "srun ", "srun --kill-on-bad-exit=1 ", 1)

	out, stderr, err := run(t, "slurm", "generate", "--nodes", "2", "--gpus-per-node", "8",
		"--container-image", "./gotrain.sqsh", "--container-mounts", "/fsx:/fsx", "--container-workdir", "/fsx/run", "--container-writable-tmpfs",
		"--", "train", "--config", "ds.json", "--data", "/fsx/data/train_*.bin")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if got := lines[len(lines)-1]; got != want {
		t.Errorf("srun line\n got %s\nwant %s (the README's recipe)", got, want)
	}
	if _, _, err := run(t, "slurm", "generate", "--nodes", "1", "--gpus-per-node", "1", "--container-writable-tmpfs"); err == nil ||
		!strings.Contains(err.Error(), "give --container-image") {
		t.Errorf("container options without an image: %v", err)
	}
}
