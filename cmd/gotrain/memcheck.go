package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/launch"
	"github.com/gotrain/gotrain/metrics"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

// The check before step 1: train compares the run's predicted peak per rank
// (trainer.CheckMemory, the estimate's own numbers) with the memory free now
// (cuMemGetInfo on a GPU; MemAvailable for host memory and CPU runs) and
// stops before allocating if it cannot fit, with the shortfall and the
// remedies, each with its predicted peak. estimate --gpu-memory prints the
// same advice for a GPU size.

// memAvailableEnv caps the host memory the check counts as free: room left
// for other jobs on a shared machine, and how tests stage a small machine.
const memAvailableEnv = "GOTRAIN_MEM_AVAILABLE"

// memoryCheckFlags are train's flags for the check.
func memoryCheckFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "skip-memory-check", Aliases: []string{"skip_memory_check"},
			Usage: "start even when the predicted peak per rank exceeds the free GPU memory (cuMemGetInfo) or host memory (MemAvailable, or $" + memAvailableEnv + " when smaller)"},
	}
}

// estimateMemoryFlags are estimate's flags for the same advice.
func estimateMemoryFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "gpu-memory", Aliases: []string{"gpu_memory"}, Usage: "GPU memory per rank, e.g. 48GiB or 80GB: says whether the run fits and, if not, the remedies with their predicted peaks (as train does before step 1)"},
		&cli.StringFlag{Name: "host-memory", Aliases: []string{"host_memory"}, Usage: "host memory per node, e.g. 512GiB, checked with --gpu-memory (default: not checked)"},
	}
}

// hostMemAvailable is MemAvailable from /proc/meminfo, capped by
// $GOTRAIN_MEM_AVAILABLE; ok is false when neither is known.
func hostMemAvailable(env func(string) string, meminfo io.Reader) (avail int64, source string, ok bool, err error) {
	if meminfo != nil {
		if kb, found := meminfoField(meminfo, "MemAvailable:"); found {
			avail, source, ok = kb, "MemAvailable", true
		}
	}
	if v := env(memAvailableEnv); v != "" {
		capped, err := parseByteSize(v)
		if err != nil {
			return 0, "", false, fmt.Errorf("$%s: %w", memAvailableEnv, err)
		}
		if !ok || capped < avail {
			avail, source, ok = capped, "$"+memAvailableEnv, true
		}
	}
	return avail, source, ok, nil
}

// meminfoField is a "<Name>: <n> kB" line of /proc/meminfo, in bytes.
func meminfoField(r io.Reader, name string) (int64, bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, found := strings.CutPrefix(sc.Text(), name)
		if !found {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 || kb > 1<<50 {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}

// memoryPreflight is train's check before step 1 on this rank: nil when
// the run fits or the check is skipped or nothing is known about free
// memory, else an error with the shortfall and the remedies; the estimate
// it made, when it made one, comes back for the start-up table. seqLen is the
// longest sequence the run trains on (a curriculum's longest stage); a
// LoRA run is estimated as one.
func memoryPreflight(c *cli.Context, rk launch.Rank, dev *trainDevice, cfg *config.Config, m model.Config, seqLen int) (*trainer.MemoryEstimate, error) {
	if c.Bool("skip-memory-check") {
		return nil, nil
	}
	eo, err := runEstimateOptions(c, cfg)
	if err != nil {
		return nil, err
	}
	var mi io.Reader
	if f, err := os.Open("/proc/meminfo"); err == nil {
		defer f.Close()
		mi = f
	}
	host, hostSrc, _, err := hostMemAvailable(os.Getenv, mi)
	if err != nil {
		return nil, err
	}
	free := trainer.FreeMemory{Host: host, HostRanks: max(1, rk.LocalWorldSize)}
	where := ""
	if dev.gpu != nil {
		f, _, err := dev.gpu.dev.MemInfo()
		if err != nil {
			return nil, fmt.Errorf("memory check: %w (pass --skip-memory-check to start without it)", err)
		}
		free.GPU, free.Device = true, int64(f)
		where = fmt.Sprintf("GPU %d (cuMemGetInfo)", dev.gpu.dev.Info().Ordinal)
	}
	if free.Device == 0 && free.Host == 0 {
		return nil, nil
	}
	mc, err := trainer.CheckMemory(cfg, m, rk.WorldSize, seqLen, eo, free)
	if err != nil {
		// The trainer meets the same problem (a schedule shorter than its
		// warmup, say) and reports it in its own words; the check is not
		// the place to fail it.
		if rk.Rank == 0 {
			fmt.Fprintf(c.App.ErrWriter, "warning: memory check skipped: the run could not be estimated: %v\n", err)
		}
		return nil, nil
	}
	if mc.Need.Fits() {
		return &mc.Estimate, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "rank %d: out of memory before step 1: ", rk.Rank)
	formatMemoryCheck(&b, mc, free, where, hostSrc)
	b.WriteString("Nothing was allocated. Apply a remedy, or pass --skip-memory-check to start anyway.")
	return nil, fmt.Errorf("%s", b.String())
}

// formatMemoryCheck writes the shortfall and the remedies in the order to
// try them, each with its predicted peak per rank and whether it fits.
func formatMemoryCheck(w io.Writer, mc trainer.MemoryCheck, free trainer.FreeMemory, gpuWhere, hostWhere string) {
	dShort, hShort := mc.Need.Short()
	peak := mc.Estimate.Peak.Total()
	var short []string
	if dShort > 0 {
		short = append(short, fmt.Sprintf("the predicted peak of %s per rank on the GPU is %s more than the %s free on %s",
			metrics.HumanBytes(peak.Device), metrics.HumanBytes(dShort), metrics.HumanBytes(free.Device), gpuWhere))
	}
	if hShort > 0 {
		what := "host memory"
		if !free.GPU {
			what = "memory (the CPU backend's device pool is host memory)"
		}
		short = append(short, fmt.Sprintf("the %d rank(s) on this machine need %s of %s at their peak, %s more than the %s free (%s)",
			max(1, free.HostRanks), metrics.HumanBytes(mc.Need.Host), what, metrics.HumanBytes(hShort), metrics.HumanBytes(free.Host), hostWhere))
	}
	if len(short) == 0 {
		fmt.Fprintf(w, "the run fits: predicted peak per rank %s on the device, %s of host memory\n", metrics.HumanBytes(peak.Device), metrics.HumanBytes(peak.Host))
		return
	}
	fmt.Fprintf(w, "%s.\n", strings.Join(short, "; and "))
	if len(mc.Fixes) == 0 {
		fmt.Fprintln(w, "No remedy is left to try: use more ranks (ZeRO-3 splits the states further) or a machine with more memory.")
		return
	}
	fmt.Fprintln(w, "Remedies, in the order to try them (predicted peak per rank, device / host):")
	for i, f := range mc.Fixes {
		if f.Err != nil {
			fmt.Fprintf(w, "  %d. %s: %s — cannot be estimated: %v\n", i+1, f.Name, f.How, f.Err)
			continue
		}
		verdict := "fits"
		if !f.Need.Fits() {
			d, h := f.Need.Short()
			verdict = "still short by " + metrics.HumanBytes(max(d, h))
		}
		fmt.Fprintf(w, "  %d. %s: %s — peak %s / %s, %s\n", i+1, f.Name, f.How,
			metrics.HumanBytes(f.Peak.Device), metrics.HumanBytes(f.Peak.Host), verdict)
	}
}

// estimateAdvice prints, for estimate --gpu-memory, whether the run fits
// that GPU and, if not, the remedies.
func estimateAdvice(c *cli.Context, cfg *config.Config, m model.Config, nproc int, eo trainer.EstimateOptions) error {
	if !c.IsSet("gpu-memory") {
		if c.IsSet("host-memory") {
			return fmt.Errorf("--host-memory is checked with --gpu-memory; give both")
		}
		return nil
	}
	gpu, err := parseByteSize(c.String("gpu-memory"))
	if err != nil {
		return fmt.Errorf("--gpu-memory: %w", err)
	}
	free := trainer.FreeMemory{GPU: true, Device: gpu, HostRanks: nproc / max(1, eo.Nodes)}
	if c.IsSet("host-memory") {
		if free.Host, err = parseByteSize(c.String("host-memory")); err != nil {
			return fmt.Errorf("--host-memory: %w", err)
		}
	}
	mc, err := trainer.CheckMemory(cfg, m, nproc, c.Int("seq-len"), eo, free)
	if err != nil {
		return err
	}
	w := c.App.Writer
	fmt.Fprintf(w, "\nOn a %s GPU", metrics.HumanBytes(gpu))
	if free.Host > 0 {
		fmt.Fprintf(w, " with %s of host memory per node", metrics.HumanBytes(free.Host))
	}
	fmt.Fprint(w, ": ")
	formatMemoryCheck(w, mc, free, "a "+c.String("gpu-memory")+" GPU", "--host-memory")
	return nil
}
