package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/internal/libsearch"
	"github.com/gotrain/gotrain/kernels"
)

// systemNVRTC is the NVRTC the loader path holds here (CI installs
// libnvrtc11.2), the library the fake Python environments below copy.
func systemNVRTC(t *testing.T) string {
	t.Helper()
	t.Setenv(kernels.EnvNVRTC, "")
	n, err := kernels.LoadNVRTC(kernels.NVRTCOptions{Search: libsearch.New(libsearch.Options{PythonSites: func() []string { return nil }})})
	if err != nil {
		if os.Getenv("GOTRAIN_REQUIRE_NVRTC") == "1" {
			t.Fatalf("NVRTC required (GOTRAIN_REQUIRE_NVRTC=1): %v", err)
		}
		t.Skipf("no NVRTC on this machine to copy into a fake Python environment: %v", err)
	}
	return n.Path()
}

// copyFile copies src to dst, making dst's directories.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestDoctorFindsNVRTCInPythonEnvironments: a copy of this machine's NVRTC
// inside a virtualenv, in the CUDA 12 wheel layout and then the CUDA 13
// one, is listed by doctor among the candidates, and loaded when the
// loader path is hidden (the test hook standing in for a machine whose
// CUDA libraries live only in a Python environment).
func TestDoctorFindsNVRTCInPythonEnvironments(t *testing.T) {
	src := systemNVRTC(t)
	for _, layout := range []struct {
		name, rel string
		major     int
	}{
		{"cuda12 wheel", "nvidia/cuda_nvrtc/lib/" + filepath.Base(src), 11},
		{"cuda13 wheel", "nvidia/cu13/lib/libnvrtc.so.13", 13},
	} {
		t.Run(layout.name, func(t *testing.T) {
			venv := t.TempDir()
			fake := filepath.Join(venv, "lib", "python3.12", "site-packages", layout.rel)
			copyFile(t, src, fake)
			t.Setenv("VIRTUAL_ENV", venv)
			t.Setenv("HOME", t.TempDir())
			t.Setenv(cuda.EnvLibrary, filepath.Join(t.TempDir(), "libcuda.so.1")) // no driver: nothing skipped for its version

			// With the loader path: the fake is a candidate.
			r := doctorJSON(t)
			nv, _ := doctorLibNamed(r.GPULibs, "nvrtc")
			if a, ok := attemptNamed(nv.Search, fake); !ok || a.Source != "$VIRTUAL_ENV" || a.Major != layout.major {
				t.Errorf("doctor does not list %s from $VIRTUAL_ENV as CUDA %d: %+v", fake, layout.major, nv.Search)
			}

			// Without it: the fake is what loads.
			t.Setenv(libsearch.EnvSkipLoaderPath, "1")
			r = doctorJSON(t)
			nv, _ = doctorLibNamed(r.GPULibs, "nvrtc")
			if nv.Err != "" || nv.Path != fake {
				t.Fatalf("nvrtc %+v, want it loaded from %s", nv, fake)
			}
			if a, _ := attemptNamed(nv.Search, fake); a.Outcome != libsearch.Loaded {
				t.Errorf("attempt %+v, want loaded", a)
			}
			text, _, err := run(t, "doctor", "--seconds", "0.01")
			if err != nil {
				t.Fatal(err)
			}
			if want := "loaded  " + fake + " (CUDA " + string(rune('0'+layout.major/10)) + string(rune('0'+layout.major%10)) + ", $VIRTUAL_ENV)"; !strings.Contains(text, want) {
				t.Errorf("doctor text lacks %q:\n%s", want, text)
			}
		})
	}
}

func doctorJSON(t *testing.T) doctorReport {
	t.Helper()
	out, _, err := run(t, "doctor", "--json", "--seconds", "0.01")
	if err != nil {
		t.Fatalf("doctor: %v", err)
	}
	var r doctorReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	return r
}

func attemptNamed(r *libsearch.Result, name string) (libsearch.Attempt, bool) {
	if r == nil {
		return libsearch.Attempt{}, false
	}
	for _, a := range r.Attempts {
		if a.Name == name {
			return a, true
		}
	}
	return libsearch.Attempt{}, false
}

// TestAutoDeviceRefusesUnusableGPU: a GPU device node (a plain file under
// the test hook's directory) with no CUDA driver makes train's default
// device an error naming the missing library and the way out; --device
// cpu trains; without the node the default trains on the CPU.
func TestAutoDeviceRefusesUnusableGPU(t *testing.T) {
	dir, modelCfg, _ := distFixture(t)
	devDir := t.TempDir()
	t.Setenv(EnvDevDir, devDir)
	t.Setenv(cuda.EnvLibrary, filepath.Join(t.TempDir(), "libcuda.so.1"))
	train := func(out string, extra ...string) (string, error) {
		args := append([]string{"train", "--config", stageConfig(t, dir, 0, 2), "--model", modelCfg, "--data", "synthetic",
			"--seq-len", "16", "--max-steps", "1", "--output-dir", filepath.Join(dir, out), "--threads", "1",
			"--metrics-addr", "off", "--peak-flops", "1e9"}, extra...)
		stdout, _, err := run(t, args...)
		return stdout, err
	}
	if _, err := train("nogpu"); err != nil {
		t.Fatalf("no GPU present: train must run on the CPU: %v", err)
	}
	if err := os.WriteFile(filepath.Join(devDir, "nvidia0"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := train("refused")
	if err == nil {
		t.Fatal("train with a GPU node and no CUDA driver ran")
	}
	for _, want := range []string{filepath.Join(devDir, "nvidia0"), "libcuda.so.1", "--device cpu"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal lacks %q: %v", want, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "refused", "metrics.jsonl")); err == nil {
		t.Error("the refused run wrote metrics")
	}
	if _, err := train("cpu", "--device", "cpu"); err != nil {
		t.Errorf("--device cpu with a GPU node: %v", err)
	}
	// CUDA_VISIBLE_DEVICES hiding every GPU asks for the CPU.
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	if _, _, err := run(t, "bench", "--device", "auto", "--model", modelCfg, "--batch", "1", "--seq-len", "8", "--steps", "1",
		"--threads", "1", "--peak-flops", "1e9"); err == nil || !strings.Contains(err.Error(), "libcuda.so.1") {
		// No driver at all: CUDA_VISIBLE_DEVICES cannot tell whether the
		// node is the user's choice, so the refusal stands.
		t.Errorf("bench with a GPU node, no driver and CUDA_VISIBLE_DEVICES='': %v", err)
	}
}
