package emu

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"

	"github.com/gotrain/gotrain/kernels"
)

// EnvLibrary is the variable the mock CUDA driver reads to find the
// emulation library.
const EnvLibrary = "GOTRAIN_MOCK_CUDA_EMU"

// kernelDecl is kernels' rule for a kernel definition: one line beginning
// `extern "C" __global__ void NAME(`.
var kernelDecl = regexp.MustCompile(`(?m)^extern "C" __global__ void ([A-Za-z_][A-Za-z0-9_]*)\(`)

// csrcDir is the repository's csrc/ directory, found from this file's
// compile-time path (tests run from the source tree).
func csrcDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("emu: cannot locate the source tree")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "..", "csrc")
	if _, err := os.Stat(filepath.Join(dir, "gt_emu.h")); err != nil {
		return "", fmt.Errorf("emu: csrc/gt_emu.h not found next to the package source (built with -trimpath?): %w", err)
	}
	return dir, nil
}

// Unit is what one library is built from: a prelude every source sees and
// the kernel sources.
type Unit struct {
	Prelude string
	Sources []kernels.Source
}

// Program is the unit of gotrain's kernel program.
func Program() Unit { return Unit{Prelude: kernels.Prelude(), Sources: kernels.Sources()} }

// Names lists the unit's kernels in source order.
func (u Unit) Names() []string {
	var names []string
	for _, s := range u.Sources {
		for _, m := range kernelDecl.FindAllStringSubmatch(s.Text, -1) {
			names = append(names, m[1])
		}
	}
	return names
}

// translationUnit is the C++ file g++ compiles: the emulation header, the
// prelude, every source, then the kernel table.
func (u Unit) translationUnit() string {
	var sb strings.Builder
	sb.WriteString("#include \"gt_emu.h\"\n")
	sb.WriteString("#line 1 \"prelude.cuh\"\n")
	sb.WriteString(u.Prelude)
	for _, s := range u.Sources {
		fmt.Fprintf(&sb, "\n#line 1 %q\n", s.Name)
		sb.WriteString(s.Text)
	}
	sb.WriteString("\n#line 1 \"gt_emu_table\"\nGT_EMU_TABLE_BEGIN\n")
	for _, n := range u.Names() {
		fmt.Fprintf(&sb, "GT_EMU_KERNEL(%s)\n", n)
	}
	sb.WriteString("GT_EMU_TABLE_END\n")
	return sb.String()
}

// gxxFlags: -O2 because emulated kernels run thousands of fibers; no
// -Werror because CUDA idioms (signed/unsigned index comparisons, #pragma
// unroll) draw host-compiler warnings that are not bugs.
var gxxFlags = []string{"-std=c++17", "-O2", "-shared", "-fPIC", "-Wall", "-Wno-sign-compare",
	"-Wno-unknown-pragmas", "-Wno-unused-function", "-Wno-unused-parameter"}

// Build compiles u into a shared library under cacheDir (a file named by
// a hash of the inputs, so an unchanged program is not rebuilt) and
// returns its path.
func Build(u Unit, cacheDir string) (string, error) {
	csrc, err := csrcDir()
	if err != nil {
		return "", err
	}
	header, err := os.ReadFile(filepath.Join(csrc, "gt_emu.h"))
	if err != nil {
		return "", err
	}
	tu := u.translationUnit()
	gxx, err := exec.LookPath("g++")
	if err != nil {
		return "", fmt.Errorf("emu: g++ not found (Debian: apt-get install g++): %w", err)
	}
	h := sha256.New()
	h.Write(header)
	h.Write([]byte(tu))
	h.Write([]byte(strings.Join(gxxFlags, " ")))
	key := hex.EncodeToString(h.Sum(nil))[:24]
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("emu: cache dir: %w", err)
	}
	lib := filepath.Join(cacheDir, "gt_emu_"+key+".so")
	if _, err := os.Stat(lib); err == nil {
		return lib, nil
	}
	tmp, err := os.MkdirTemp(cacheDir, "build-")
	if err != nil {
		return "", fmt.Errorf("emu: %w", err)
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "program.cpp")
	if err := os.WriteFile(src, []byte(tu), 0o644); err != nil {
		return "", fmt.Errorf("emu: %w", err)
	}
	out := filepath.Join(tmp, "lib.so")
	args := append(append([]string{}, gxxFlags...), "-I", csrc, "-o", out, src)
	if msg, err := exec.Command(gxx, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("emu: g++ %s: %w\n%s", strings.Join(args, " "), err, msg)
	}
	// Rename into place so a concurrent build never sees a partial file.
	if err := os.Rename(out, lib); err != nil {
		return "", fmt.Errorf("emu: %w", err)
	}
	return lib, nil
}

// DefaultCacheDir is $GOTRAIN_CACHE/emu or the user cache directory's
// gotrain/emu.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv(kernels.EnvCache); d != "" {
		return filepath.Join(d, "emu"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("emu: no cache directory (set %s): %w", kernels.EnvCache, err)
	}
	return filepath.Join(d, "gotrain", "emu"), nil
}
