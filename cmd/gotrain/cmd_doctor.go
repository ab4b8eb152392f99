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
	"github.com/gotrain/gotrain/kernels"
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
	SgemmGFLOPS float64   `json:"sgemm_gflops"`
	VectorMath  string    `json:"vector_math"`
	// GPULibs are the native GPU libraries, each with its version or why
	// it is absent: the CUDA driver, NVRTC, cuBLAS, NCCL (see doctorLibs).
	GPULibs []doctorLib `json:"gpu_libraries"`
	// GPUs are the devices as the CUDA driver reports them.
	GPUs []cuda.DeviceInfo `json:"gpus"`
	// NVML is what NVML reports, or NVMLError why it could not be asked.
	NVML      *metrics.NVMLReport `json:"nvml,omitempty"`
	NVMLError string              `json:"nvml_error,omitempty"`
}

// doctorLib is one native library as doctor found it: its version and the
// file that loaded, or Err saying why it is absent and what to install.
type doctorLib struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Path    string `json:"path,omitempty"`
	Err     string `json:"error,omitempty"`
}

// ---- GPU libraries ---------------------------------------------------------

// doctorLibs lists the GPU libraries in report order, each probed by one
// small function returning a doctorLib (doctorCUDA and doctorNVRTC here).
// The cuBLAS and NCCL probes, doctorCUBLAS() and doctorNCCL() of
// doctor_gpu_libs.go, belong in this list after NVRTC. No probe may fail
// the command: a machine without a GPU is a normal answer.
func doctorLibs(cudaLib doctorLib) []doctorLib {
	return []doctorLib{cudaLib, doctorNVRTC(), doctorCUBLAS(), doctorNCCL()}
}

// doctorCUDA loads the CUDA driver and lists its devices.
func doctorCUDA() (doctorLib, []cuda.DeviceInfo) {
	lib := doctorLib{Name: "cuda driver"}
	drv, err := cuda.Load(cuda.Options{})
	if err != nil {
		lib.Err = err.Error()
		return lib, nil
	}
	lib.Version, lib.Path = drv.VersionString(), drv.Path()
	devs, err := drv.Devices()
	if err != nil {
		lib.Err = err.Error()
	}
	return lib, devs
}

// doctorNVRTC loads NVRTC, which compiles gotrain's kernels at run time.
func doctorNVRTC() doctorLib {
	lib := doctorLib{Name: "nvrtc"}
	n, err := kernels.LoadNVRTC(kernels.NVRTCOptions{})
	if err != nil {
		lib.Err = err.Error()
		return lib
	}
	lib.Version, lib.Path = n.VersionString(), n.Path()
	if archs := n.SupportedArchs(); len(archs) > 0 {
		lib.Version += fmt.Sprintf(", targets %s..%s", archs[0], archs[len(archs)-1])
	}
	return lib
}

// printGPUs writes the GPU part of the text report.
func printGPUs(w io.Writer, r doctorReport) {
	for _, l := range r.GPULibs {
		if l.Err != "" && l.Version == "" {
			fmt.Fprintf(w, "%-12s not available: %s\n", l.Name, l.Err)
			continue
		}
		fmt.Fprintf(w, "%-12s %s (%s)\n", l.Name, l.Version, l.Path)
		if l.Err != "" {
			fmt.Fprintf(w, "%-12s %s\n", "", l.Err)
		}
	}
	if len(r.GPULibs) > 0 && r.GPULibs[0].Version != "" {
		fmt.Fprintf(w, "gpus         %d through the CUDA driver\n", len(r.GPUs))
		for _, g := range r.GPUs {
			fmt.Fprintf(w, "  gpu %s\n", g)
		}
	}
	if r.NVML == nil {
		fmt.Fprintf(w, "nvml         not available: %s\n", r.NVMLError)
		return
	}
	fmt.Fprintf(w, "nvml         driver %s, NVML %s, %d GPUs\n", r.NVML.DriverVersion, r.NVML.NVMLVersion, len(r.NVML.GPUs))
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
		Description: "Picks the CPU GEMM as training would (--blas, else $" + blas.EnvBLAS + ", else gotrain's own Go GEMM; OpenBLAS\n" +
			"gets OPENBLAS_CORETYPE from the CPU features when unset and is checked against a Go reference) and measures\n" +
			"that GEMM's sgemm GFLOP/s, the roofline MFU is taken against.",
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
			impl, info, err := benchBLAS(c.String("blas"), threads)
			if err != nil {
				return err
			}
			r := doctorReport{
				OS: runtime.GOOS, Arch: runtime.GOARCH, CPU: cpuModel(), Cores: runtime.NumCPU(),
				CPUFeatures: blas.HostCPUFeatures().Names(), GoVersion: runtime.Version(), BLAS: info,
				SgemmGFLOPS: blas.MeasurePeak(impl, c.Float64("seconds")),
				VectorMath:  cpu.VectorMath(),
			}
			var cudaLib doctorLib
			cudaLib, r.GPUs = doctorCUDA()
			r.GPULibs = doctorLibs(cudaLib)
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
			fmt.Fprintf(w, "sgemm        %.1f GFLOP/s (1024×1024×1024, fp32, the %s GEMM above)\n", r.SgemmGFLOPS, info.Name)
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
