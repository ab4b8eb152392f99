package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/launch"
	"github.com/gotrain/gotrain/model"
)

// Start-up checks of what `gotrain train` reads, made before anything is
// allocated: the tokenizer.json beside the shards and whether the model can
// fit the machine at all. The shards' token ids are checked by the data
// loader, against the model's vocabulary, before the first step.

// dataTokenizer reads and validates the tokenizer.json that gotrain data
// prepare wrote beside the training shards, and the one beside the
// validation shards when they live elsewhere: nil when the training shards
// have none (llm.c's). A file that is there but unreadable, unparsable or
// wrong is an error now, not after training.
func dataTokenizer(train, val []string) (*data.TokenizerInfo, error) {
	info, err := tokenizerBeside("--data", train)
	if err != nil || len(val) == 0 {
		return info, err
	}
	vinfo, err := tokenizerBeside("--val-data", val)
	if err != nil {
		return nil, err
	}
	if info != nil && vinfo != nil && !info.Same(*vinfo) {
		return nil, fmt.Errorf("--data was prepared with tokenizer %s (%d ids) but --val-data with %s (%d ids); prepare both with the same tokenizer",
			info.Tokenizer, info.VocabSize, vinfo.Tokenizer, vinfo.VocabSize)
	}
	if info == nil {
		info = vinfo
	}
	return info, nil
}

// tokenizerBeside reads the tokenizer.json in the first shard's directory.
func tokenizerBeside(flag string, patterns []string) (*data.TokenizerInfo, error) {
	shards, err := data.ResolveShards(patterns)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	info, err := data.ReadTokenizerInfo(filepath.Dir(shards[0]))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return &info, nil
}

// paramBytes is what the run must hold for each parameter at the least: its
// fp32 master copy.
const paramBytes = 4

// checkModelFits refuses a model whose fp32 master weights alone cannot fit
// in this machine's memory: hostBytes (MemTotal) shared by the ranks on this
// node, plus deviceBytes of each rank's GPU (0 on the CPU). Only ZeRO-3
// partitions the parameters over the ranks; below it every rank holds them
// all. It is a gate for models that can never run, checked in microseconds
// before anything is allocated, not an estimate of the run's peak (gotrain
// estimate gives that).
func checkModelFits(cfg model.Config, name string, stage int, rk launch.Rank, hostBytes, deviceBytes uint64) error {
	n := uint64(cfg.NumParams()) // Validate bounds it by MaxParams: no overflow below
	need := n * paramBytes
	if stage >= 3 {
		need = (need + uint64(rk.WorldSize) - 1) / uint64(rk.WorldSize)
	}
	have := hostBytes/uint64(max(1, rk.LocalWorldSize)) + deviceBytes
	if need <= have {
		return nil
	}
	where := fmt.Sprintf("this machine's %s of memory (MemTotal)", humanBytes(hostBytes))
	if rk.LocalWorldSize > 1 {
		where += fmt.Sprintf(" shared by %d ranks", rk.LocalWorldSize)
	}
	if deviceBytes > 0 {
		where += fmt.Sprintf(" plus %s on each rank's GPU", humanBytes(deviceBytes))
	}
	split := "every rank holds all of them below ZeRO stage 3"
	if stage >= 3 {
		split = fmt.Sprintf("ZeRO-3 splits them over %d ranks", rk.WorldSize)
	}
	return fmt.Errorf("--model %s (n_layer %d, n_embd %d, vocab %d) has %s parameters: their fp32 master copy alone needs %s per rank (%s), "+
		"more than the %s per rank of %s; pick a smaller model, or run ZeRO stage 3 on more ranks, which partitions the parameters",
		name, cfg.L, cfg.C, cfg.V, groupDigits(int64(n)), humanBytes(need), split, humanBytes(have), where)
}

// humanBytes writes b in GiB, or TiB once that reads better.
func humanBytes(b uint64) string {
	if b >= 1<<40 {
		return fmt.Sprintf("%.1f TiB", float64(b)/(1<<40))
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}

// hostMemTotal is MemTotal of /proc/meminfo in bytes; ok is false where the
// file is missing or unreadable (not Linux), and the gate is then skipped.
func hostMemTotal() (total uint64, ok bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	return parseMemTotal(f)
}

// parseMemTotal finds "MemTotal:  <n> kB" in meminfo's text.
func parseMemTotal(r io.Reader) (uint64, bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, found := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !found {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil || kb > 1<<50 {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}
