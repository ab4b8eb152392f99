package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/blas"
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
	CUDA        string    `json:"cuda"`
}

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "report what this machine offers gotrain: CPU, BLAS and its core type, measured GEMM speed, GPUs",
		Description: "Loads OpenBLAS as training would (choosing OPENBLAS_CORETYPE from the CPU features when unset,\n" +
			"then checking it against a Go reference) and measures sgemm GFLOP/s, the roofline MFU is taken against.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
			&cli.IntFlag{Name: "threads", Usage: "BLAS threads (0: all cores)"},
			&cli.Float64Flag{Name: "seconds", Value: 1, Usage: "time spent measuring GEMM speed"},
		},
		Action: func(c *cli.Context) error {
			threads := c.Int("threads")
			if threads <= 0 {
				threads = runtime.GOMAXPROCS(0)
			}
			impl, info := blas.Default(threads)
			r := doctorReport{
				OS: runtime.GOOS, Arch: runtime.GOARCH, CPU: cpuModel(), Cores: runtime.NumCPU(),
				CPUFeatures: blas.HostCPUFeatures().Names(), GoVersion: runtime.Version(), BLAS: info,
				SgemmGFLOPS: blas.MeasurePeak(impl, c.Float64("seconds")),
				CUDA:        "not checked: the CUDA backend is not part of this build yet",
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
			fmt.Fprintf(w, "sgemm        %.1f GFLOP/s (1024×1024×1024, fp32)\n", r.SgemmGFLOPS)
			fmt.Fprintf(w, "cuda         %s\n", r.CUDA)
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
