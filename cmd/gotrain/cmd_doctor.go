package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/internal/libsearch"
	"github.com/gotrain/gotrain/metrics"
)

// doctorReport is what `gotrain doctor` found; --json prints it as is.
type doctorReport struct {
	OS          string    `json:"os"`
	Arch        string    `json:"arch"`
	CPU         string    `json:"cpu"`
	Cores       int       `json:"cores"`
	CPUFeatures []string  `json:"cpu_features"`
	GoVersion   string    `json:"go_version"`
	BLAS        blas.Info `json:"blas"`
	// BLASChoice says how the GEMM was chosen (measured, or forced).
	BLASChoice  string  `json:"blas_choice"`
	SgemmGFLOPS float64 `json:"sgemm_gflops"`
	// RooflineGFLOPS is the best sgemm rate measured on this machine,
	// either GEMM: what CPU MFU is taken against.
	RooflineGFLOPS float64 `json:"roofline_gflops"`
	VectorMath     string  `json:"vector_math"`
	// GPULibs are the native GPU libraries, each with its version or why
	// it is absent: the CUDA driver, NVRTC, cuBLAS, NCCL (see doctorLibs).
	GPULibs []doctorLib `json:"gpu_libraries"`
	// GPUs are the devices as the CUDA driver reports them.
	GPUs []cuda.DeviceInfo `json:"gpus"`
	// NVML is what NVML reports, or NVMLError why it could not be asked.
	NVML      *metrics.NVMLReport `json:"nvml,omitempty"`
	NVMLError string              `json:"nvml_error,omitempty"`
}

// doctorLibNamed finds a library of the report by name.
func doctorLibNamed(libs []doctorLib, name string) (doctorLib, bool) {
	for _, l := range libs {
		if l.Name == name {
			return l, true
		}
	}
	return doctorLib{}, false
}

// doctorLib is one native library as doctor found it: its version and the
// file that loaded, or Err saying why it is absent and what to install.
type doctorLib struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Path    string `json:"path,omitempty"`
	Err     string `json:"error,omitempty"`
	// Search lists every candidate file and what became of it; Fix says
	// what to install when none loaded.
	Search *libsearch.Result `json:"search,omitempty"`
	Fix    string            `json:"fix,omitempty"`
}

// ---- GPU libraries ---------------------------------------------------------

// doctorLibs lists the GPU libraries in report order, each probed by one
// small function of doctor_gpu_libs.go returning a doctorLib, searched for
// the driver's CUDA version (0: no driver, nothing skipped for it). No
// probe may fail the command: a machine without a GPU is a normal answer.
func doctorLibs(cudaLib doctorLib, driverCUDA int) []doctorLib {
	search := libsearch.FromEnv(driverCUDA)
	return []doctorLib{cudaLib, doctorNVRTC(search), doctorCUBLAS(search), doctorNCCL(search),
		doctorNVML(search)}
}

// doctorCUDA loads the CUDA driver and lists its devices; version is
// cuDriverGetVersion's number (0 without a driver).
func doctorCUDA() (lib doctorLib, devs []cuda.DeviceInfo, version int) {
	lib = doctorLib{Name: "cuda driver"}
	drv, err := cuda.Load(cuda.Options{})
	if err != nil {
		lib.Err = err.Error()
		return lib, nil, 0
	}
	lib.Version, lib.Path = drv.VersionString(), drv.Path()
	devs, err = drv.Devices()
	if err != nil {
		lib.Err = err.Error()
	}
	return lib, devs, drv.Version()
}

// printMissing writes a library that did not load: the candidates and
// the fix when the search is known, else the loader's error.
func printMissing(w io.Writer, l doctorLib) {
	if l.Search == nil || l.Fix == "" {
		fmt.Fprintf(w, "%-12s not available: %s\n", l.Name, l.Err)
		return
	}
	fmt.Fprintf(w, "%-12s not available\n", l.Name)
	printSearch(w, l.Search)
	fmt.Fprintf(w, "%-12s   fix: %s\n", "", l.Fix)
}

// printGPUs writes the GPU part of the text report.
func printGPUs(w io.Writer, r doctorReport) {
	for _, l := range r.GPULibs {
		if l.Name == "nvml" {
			continue // its report follows the GPUs
		}
		if l.Err != "" && l.Version == "" {
			printMissing(w, l)
			continue
		}
		fmt.Fprintf(w, "%-12s %s (%s)\n", l.Name, l.Version, l.Path)
		if l.Err != "" {
			fmt.Fprintf(w, "%-12s %s\n", "", l.Err)
		}
		printSearch(w, l.Search)
	}
	if len(r.GPULibs) > 0 && r.GPULibs[0].Version != "" {
		fmt.Fprintf(w, "gpus         %d through the CUDA driver\n", len(r.GPUs))
		for _, g := range r.GPUs {
			fmt.Fprintf(w, "  gpu %s\n", g)
		}
	}
	nvml, _ := doctorLibNamed(r.GPULibs, "nvml")
	if r.NVML == nil {
		if nvml.Err == "" {
			nvml.Err = r.NVMLError
		}
		printMissing(w, nvml)
		return
	}
	fmt.Fprintf(w, "nvml         driver %s, NVML %s, %d GPUs\n", r.NVML.DriverVersion, r.NVML.NVMLVersion, len(r.NVML.GPUs))
	printSearch(w, nvml.Search)
	for _, g := range r.NVML.GPUs {
		busy := "utilization n/a"
		if g.Utilization >= 0 {
			busy = fmt.Sprintf("%.0f%% busy", 100*g.Utilization)
		}
		fmt.Fprintf(w, "  gpu %d: %s, cc %d.%d, %.1f GiB (%.1f GiB used), %s, %s\n", g.Index, g.Name, g.CCMajor, g.CCMinor,
			float64(g.MemoryTotalBytes)/(1<<30), float64(g.MemoryUsedBytes)/(1<<30), busy, g.PCIBusID)
		if g.Err != "" {
			fmt.Fprintf(w, "    %s\n", g.Err)
		}
	}
}

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "report what this machine offers gotrain: CPU, BLAS and its core type, measured GEMM speed, GPUs",
		Description: "Picks the CPU GEMM as training would (--blas, else $" + blas.EnvBLAS + ", else the faster of gotrain's Go GEMM and\n" +
			"OpenBLAS, timed once per machine on the 1024³ product and cached; OpenBLAS gets OPENBLAS_CORETYPE from the CPU\n" +
			"features when unset and is checked against a Go reference), says why, and measures its sgemm GFLOP/s and the\n" +
			"machine's roofline (the best of both GEMMs), which CPU MFU is taken against.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
			&cli.IntFlag{Name: "threads", Usage: "BLAS threads (0: all cores)"},
			&cli.StringFlag{Name: "blas", Value: "auto", Usage: "CPU GEMM to report and time: go, openblas or auto"},
			&cli.Float64Flag{Name: "seconds", Value: 1, Usage: "time spent measuring GEMM speed"},
			&cli.BoolFlag{Name: "selftest", Usage: "on a GPU: run every op against the CPU backend and print the errors, a GEMM and a collective figure"},
			&cli.IntFlag{Name: "gpu", Usage: "--selftest: the GPU to test (ordinal among the visible ones)"},
			&cli.IntFlag{Name: "gemm-size", Value: 8192, Usage: "--selftest: M = N = K of the timed bf16 GEMM"},
			&cli.IntFlag{Name: "collective-mib", Value: 256, Usage: "--selftest: all-reduce message size across the visible GPUs, MiB"},
		},
		Action: func(c *cli.Context) error {
			threads := c.Int("threads")
			if threads <= 0 {
				threads = runtime.GOMAXPROCS(0)
			}
			if c.Bool("selftest") {
				return runSelftest(c, threads)
			}
			if c.Bool("e2e") {
				return runE2E(c, threads)
			}
			if c.Bool("comm") {
				return runDoctorComm(c, doctorCommOptions{})
			}
			gemm, err := chooseCPUGEMM(c.String("blas"), threads, nil)
			if err != nil {
				return err
			}
			info := gemm.info
			r := doctorReport{
				OS: runtime.GOOS, Arch: runtime.GOARCH, CPU: cpuModel(), Cores: runtime.NumCPU(),
				CPUFeatures: blas.HostCPUFeatures().Names(), GoVersion: runtime.Version(), BLAS: info,
				BLASChoice: gemm.why, SgemmGFLOPS: blas.MeasurePeak(gemm.impl, c.Float64("seconds")),
				RooflineGFLOPS: gemm.roofline / 1e9, VectorMath: cpu.VectorMath(),
			}
			cudaLib, gpus, driverCUDA := doctorCUDA()
			r.GPUs = gpus
			r.GPULibs = doctorLibs(cudaLib, driverCUDA)
			if rep, err := metrics.QueryDefaultNVML(""); err != nil {
				r.NVMLError = err.Error()
			} else {
				r.NVML = &rep
			}
			w := c.App.Writer
			if c.Bool("json") {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			fmt.Fprintf(w, "os/arch      %s/%s, Go %s\n", r.OS, r.Arch, r.GoVersion)
			fmt.Fprintf(w, "cpu          %s, %d logical cores\n", r.CPU, r.Cores)
			fmt.Fprintf(w, "cpu features %s\n", strings.Join(r.CPUFeatures, " "))
			fmt.Fprintf(w, "blas         %s", info.Name)
			if info.Library != "" {
				fmt.Fprintf(w, " (%s)", info.Library)
			}
			fmt.Fprintf(w, ", %d threads\n", info.Threads)
			fmt.Fprintf(w, "blas choice  %s\n", r.BLASChoice)
			if info.Name == "openblas" {
				how := "preset in the environment"
				if info.CoreTypeChosen != "" {
					how = "chosen by gotrain from the CPU features"
				} else if info.CoreTypeEnv == "" {
					how = "detected by OpenBLAS"
				}
				fmt.Fprintf(w, "core type    %s (%s)\n", info.CoreType, how)
			}
			if info.Note != "" {
				fmt.Fprintf(w, "note         %s\n", info.Note)
			}
			fmt.Fprintf(w, "sgemm        %.1f GFLOP/s (1024×1024×1024, fp32, the %s GEMM above); roofline %.1f GFLOP/s (the best measured on this machine, either GEMM: CPU MFU is taken against it)\n",
				r.SgemmGFLOPS, info.Name, r.RooflineGFLOPS)
			fmt.Fprintf(w, "vector math  %s (softmax and exp loops; avx512 needs a GOEXPERIMENT=simd build, as make build does)\n", r.VectorMath)
			printGPUs(w, r)
			return nil
		},
	}
}

// cpuModel reads the CPU's model name on Linux.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
