package model

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// saveTestModel is a small GPT-2 whose safetensors file is ~120 KB.
func saveTestModel() (Config, []float32) {
	cfg := GPT2(Config{MaxT: 16, V: 64, Vp: PadVocab(64), L: 2, NH: 2, C: 32})
	params := make([]float32, NewLayout(cfg).NumParams())
	for i := range params {
		params[i] = float32(i%97) / 97
	}
	return cfg, params
}

// TestSaveHFStoppedMidWriteKeepsOldFile: a process whose write of
// model.safetensors stops partway (here: the file-size limit cuts it at
// 4 KiB, as a full disk or a kill would) leaves the previous file whole;
// the old code truncated it first and left a partial file.
func TestSaveHFStoppedMidWriteKeepsOldFile(t *testing.T) {
	if dir := os.Getenv("GOTRAIN_TEST_SAVEHF_DIR"); dir != "" {
		saveHFUnderSizeLimit(t, dir)
		return
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	cfg, params := saveTestModel()
	if err := SaveHF(path, cfg, params, backend.F32); err != nil {
		t.Fatal(err)
	}
	if err := WriteHFConfig(filepath.Join(dir, "config.json"), cfg); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil || len(good) < 8<<10 {
		t.Fatalf("the first save wrote %d bytes, %v", len(good), err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSaveHFStoppedMidWriteKeepsOldFile$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GOTRAIN_TEST_SAVEHF_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, good) {
		t.Fatalf("model.safetensors is %d bytes after an interrupted save, want the previous %d bytes intact", len(got), len(good))
	}
	if _, _, err := LoadHF(path, nil); err != nil {
		t.Errorf("the previous file no longer loads: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("files left beside it: %v", ents)
	}
}

// saveHFUnderSizeLimit runs in the child: writes beyond 4 KiB fail with
// EFBIG (Go ignores SIGXFSZ), so SaveHF stops partway and must fail.
func saveHFUnderSizeLimit(t *testing.T, dir string) {
	lim := syscall.Rlimit{Cur: 4 << 10, Max: 4 << 10}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	cfg, params := saveTestModel()
	for i := range params {
		params[i] = -params[i]
	}
	if err := SaveHF(filepath.Join(dir, "model.safetensors"), cfg, params, backend.F32); err == nil {
		t.Fatal("SaveHF succeeded beyond the file-size limit")
	} else {
		t.Logf("SaveHF under a 4 KiB limit: %v", err)
	}
}
