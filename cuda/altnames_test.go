package cuda_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/cuda/cudatest"
)

// elapsedWorks times two events on device 0 of drv, which needs the
// driver's elapsed-time entry point bound to a working symbol.
func elapsedWorks(t *testing.T, drv *cuda.Driver) {
	t.Helper()
	d := openDevice(t, drv, 0)
	start, err := d.NewEvent(true)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := d.NewEvent(true)
	s, err := d.NewStream(false)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.RecordEvent(start, s); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	if err := d.RecordEvent(end, s); err != nil {
		t.Fatal(err)
	}
	if err := d.EventSynchronize(end); err != nil {
		t.Fatal(err)
	}
	if el, err := d.EventElapsed(start, end); err != nil || el < 2*time.Millisecond {
		t.Errorf("EventElapsed = %v, %v; want at least 2ms", el, err)
	}
	for _, e := range []cuda.Event{start, end} {
		if err := d.DestroyEvent(e); err != nil {
			t.Error(err)
		}
	}
	if err := d.DestroyStream(s); err != nil {
		t.Error(err)
	}
}

// The driver's elapsed-time call is exported as cuEventElapsedTime before
// 12.8, as both from 12.8, and the CUDA 13.0 header declares only
// cuEventElapsedTime_v2. Every one of those drivers loads, and the newer
// name is bound where both exist (the mock's plain name then fails).
func TestElapsedTimeSymbolAcrossReleases(t *testing.T) {
	for _, c := range []struct {
		name    string
		defines []string
		version string
	}{
		{"12.4 plain name only", nil, "12.4"},
		{"12.8 both names", []string{"MOCK_CUDA_DRIVER_VERSION=12080"}, "12.8"},
		{"13.0 both names", []string{"MOCK_CUDA_DRIVER_VERSION=13000"}, "13.0"},
		{"13.0 _v2 only", []string{"MOCK_CUDA_DRIVER_VERSION=13000", "MOCK_CUDA13_NAMES_ONLY"}, "13.0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(cudatest.EnvDevices, "1")
			drv, err := cuda.Load(cuda.Options{Library: cudatest.BuildMockDriver(t, c.defines...)})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if drv.VersionString() != c.version {
				t.Errorf("VersionString = %s, want %s", drv.VersionString(), c.version)
			}
			elapsedWorks(t, drv)
		})
	}
}

// A driver with neither name is refused, and the error names both (either
// would do) and the CUDA release the driver is for.
func TestMissingAlternateNamesEveryName(t *testing.T) {
	_, err := cuda.Load(cuda.Options{Library: cudatest.BuildMockDriver(t, "MOCK_CUDA13_NAMES_ONLY")})
	if !errors.Is(err, cuda.ErrNotAvailable) {
		t.Fatalf("Load = %v, want ErrNotAvailable", err)
	}
	for _, want := range []string{"cuEventElapsedTime_v2 or cuEventElapsedTime", "a driver for CUDA 12.4", "driver too old"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
