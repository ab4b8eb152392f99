package model

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gotrain/gotrain/internal/regularfile"
)

// InitFrom loads host weights from a file or a Hugging Face snapshot
// directory, picking the format by extension and then by content: a
// directory with a config.json is a snapshot (LoadSnapshot: single-file or
// sharded, any architecture), any other directory means its
// model.safetensors; ".bin" or a file starting with LLMCMagic is an llm.c
// model file; anything else is read as Hugging Face safetensors (see LoadHF
// for the role of fallback).
func InitFrom(path string, fallback *Config) (Config, []float32, error) {
	w, err := OpenInitFrom(path, fallback)
	if err != nil {
		return Config{}, nil, err
	}
	defer w.Close()
	p := make([]float32, NewLayout(w.Config()).NumParams())
	if err := w.ReadRange(p, 0); err != nil {
		return Config{}, nil, fmt.Errorf("load %s: %w", path, err)
	}
	return w.Config(), p, nil
}

// WeightSource reads a model's weights by range of the flat layout, so a
// caller fills one parameter group or one ZeRO partition at a time and
// never needs the whole model in memory: *Weights reads Hugging Face
// files on demand. Close releases its files.
type WeightSource interface {
	Config() Config
	ReadRange(dst []float32, off int) error
	Close() error
}

// OpenInitFrom opens path's weights as InitFrom reads them, for range
// reads: a snapshot directory (config.json and model.safetensors or the
// shards of model.safetensors.index.json), another directory's
// model.safetensors, a safetensors file (its config.json beside it, else
// fallback) — all read on demand — or an llm.c .bin file, which is read
// whole (GPT-2 sizes).
func OpenInitFrom(path string, fallback *Config) (WeightSource, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("init from: %w", err)
	}
	if st.IsDir() {
		if _, err := os.Stat(filepath.Join(path, hfConfigName)); err == nil {
			return OpenSnapshot(path)
		}
		path = filepath.Join(path, hfWeightsName)
	}
	isLLMC := strings.HasSuffix(path, ".bin")
	if !isLLMC && !strings.HasSuffix(path, ".safetensors") {
		f, _, err := regularfile.Open("weights", path)
		if err != nil {
			return nil, fmt.Errorf("init from: %w", err)
		}
		var magic [4]byte
		_, err = io.ReadFull(f, magic[:])
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("init from %s: not a model file: %w", path, err)
		}
		isLLMC = binary.LittleEndian.Uint32(magic[:]) == LLMCMagic
	}
	if isLLMC {
		cfg, params, err := LoadLLMC(path)
		if err != nil {
			return nil, err
		}
		return hostWeights{cfg: cfg, read: SliceReader(params)}, nil
	}
	cfg, err := hfConfigFor(path, fallback)
	if err != nil {
		return nil, err
	}
	return openWeightFiles(path, []string{path}, nil, cfg)
}

// hostWeights are weights already in memory.
type hostWeights struct {
	cfg  Config
	read RangeReader
}

func (h hostWeights) Config() Config                         { return h.cfg }
func (h hostWeights) ReadRange(dst []float32, off int) error { return h.read(dst, off) }
func (h hostWeights) Close() error                           { return nil }
