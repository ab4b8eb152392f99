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
	if st, err := os.Stat(path); err != nil {
		return Config{}, nil, fmt.Errorf("init from: %w", err)
	} else if st.IsDir() {
		if _, err := os.Stat(filepath.Join(path, hfConfigName)); err == nil {
			return LoadSnapshot(path)
		}
		path = filepath.Join(path, hfWeightsName)
	}
	if strings.HasSuffix(path, ".safetensors") {
		return LoadHF(path, fallback)
	}
	if strings.HasSuffix(path, ".bin") {
		return LoadLLMC(path)
	}
	f, _, err := regularfile.Open("weights", path)
	if err != nil {
		return Config{}, nil, fmt.Errorf("init from: %w", err)
	}
	var magic [4]byte
	_, err = io.ReadFull(f, magic[:])
	f.Close()
	if err != nil {
		return Config{}, nil, fmt.Errorf("init from %s: not a model file: %w", path, err)
	}
	if binary.LittleEndian.Uint32(magic[:]) == LLMCMagic {
		return LoadLLMC(path)
	}
	return LoadHF(path, fallback)
}
