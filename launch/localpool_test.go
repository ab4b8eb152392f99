package launch

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestNewLocalPool(t *testing.T) {
	tests := []struct {
		name        string
		visible     string
		set         bool
		gpus, nproc int
		slots       []int
		gpu         bool
		names       []string
	}{
		{"cuda visible numbers", "2,3", true, 8, 0, []int{2, 3}, true, nil},
		{"cuda visible names", "GPU-aa, MIG-bb", true, 8, 0, []int{0, 1}, true, []string{"GPU-aa", "MIG-bb"}},
		{"cuda visible set empty means no GPU", "", true, 8, 3, []int{0, 1, 2}, false, nil},
		{"device nodes", "", false, 4, 0, []int{0, 1, 2, 3}, true, nil},
		{"cpu default one rank", "", false, 0, 0, []int{0}, false, nil},
		{"cpu nproc", "", false, 0, 3, []int{0, 1, 2}, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewLocalPool(tc.visible, tc.set, tc.gpus, tc.nproc)
			if p.Node.Host != "localhost" || !reflect.DeepEqual(p.Node.Slots, tc.slots) || p.GPU != tc.gpu || !reflect.DeepEqual(p.Names, tc.names) || p.Source == "" {
				t.Fatalf("got %+v", p)
			}
		})
	}
	named := NewLocalPool("GPU-a,GPU-b,GPU-c", true, 0, 0)
	if got := named.CUDAVisible(Node{"localhost", []int{0, 2}}); got != "GPU-a,GPU-c" {
		t.Errorf("named devices: %q", got)
	}
	if got := NewLocalPool("1,5", true, 0, 0).CUDAVisible(Node{"localhost", []int{5}}); got != "" {
		t.Errorf("numbered devices: %q, want \"\" (the slots)", got)
	}
	if got := NewLocalPool("", false, 0, 2).CUDAVisible(Node{"localhost", []int{0, 1}}); got != "-" {
		t.Errorf("cpu: %q, want \"-\"", got)
	}
}

func TestCountNvidiaDevices(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"nvidia0", "nvidia1", "nvidia12", "nvidiactl", "nvidia-uvm", "nvidia-caps", "null"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := CountNvidiaDevices(dir); got != 3 {
		t.Fatalf("counted %d GPUs, want 3", got)
	}
	if got := CountNvidiaDevices(filepath.Join(dir, "missing")); got != 0 {
		t.Fatalf("missing dir: %d", got)
	}
}
