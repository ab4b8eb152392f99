package kernels_test

import (
	"strings"
	"testing"

	"github.com/gotrain/gotrain/kernels"
)

// Every kernel of the program compiles to a CUBIN for sm_80 (A100) and
// sm_90 (H100), and each CUBIN carries every kernel's entry.
func TestProgramCompilesForSM80AndSM90(t *testing.T) {
	n := requireNVRTC(t)
	names := kernels.KernelNames()
	if len(names) == 0 {
		t.Fatal("no kernels found in kernels/*.cu")
	}
	seen := map[string]bool{}
	for _, name := range names {
		if seen[name] {
			t.Errorf("kernel %s is defined twice", name)
		}
		seen[name] = true
	}
	for _, arch := range []kernels.SM{80, 90} {
		img, err := n.Compile(kernels.Program(), kernels.ProgramName, arch, kernels.CUBIN)
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		checkCUBIN(t, img.Data, arch)
		for _, name := range names {
			// ELF symbol names are NUL-terminated strings in the image.
			if !strings.Contains(string(img.Data), "\x00"+name+"\x00") {
				t.Errorf("%s CUBIN lacks kernel %s", arch, name)
			}
		}
		if strings.Contains(img.Log, "warning") {
			t.Errorf("%s: NVRTC warnings:\n%s", arch, img.Log)
		}
		t.Logf("%s: %d kernels, %d-byte CUBIN", arch, len(names), len(img.Data))
	}
}

// Every kernel is declared the one way KernelNames counts, so none can
// hide from the emulation test.
func TestEveryGlobalFunctionIsCounted(t *testing.T) {
	for _, s := range kernels.Sources() {
		count := strings.Count(s.Text, "__global__")
		declared := 0
		for _, line := range strings.Split(s.Text, "\n") {
			if strings.HasPrefix(line, `extern "C" __global__ void `) {
				declared++
			}
		}
		if count != declared {
			t.Errorf("%s: %d __global__ mentions but %d one-line kernel declarations", s.Name, count, declared)
		}
	}
}
