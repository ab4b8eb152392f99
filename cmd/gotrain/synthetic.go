package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

// `gotrain train --data synthetic[:V]` trains on random token ids instead of
// shards: a smoke test of the whole path (launch, rendezvous, ZeRO,
// offload, checkpoints) for any model and vocabulary, before any data is
// prepared. V, when given, is the vocabulary the ids are drawn from (a
// preset's vocabulary is resized to it; a config.json's must hold it);
// without it, the model's.

// syntheticName is the --data value that asks for random tokens.
const syntheticName = "synthetic"

// syntheticData reports whether --data asks for random tokens and the
// vocabulary it names (0: the model's).
func syntheticData(patterns []string) (vocab int, ok bool, err error) {
	var found bool
	for _, p := range patterns {
		name, v, hasV := strings.Cut(p, ":")
		if name != syntheticName {
			continue
		}
		found = true
		if hasV {
			if vocab, err = strconv.Atoi(v); err != nil || vocab < 2 {
				return 0, false, fmt.Errorf("--data %s: the vocabulary after %q must be a whole number ≥ 2, e.g. --data synthetic:50257", p, syntheticName+":")
			}
		}
	}
	if found && len(patterns) > 1 {
		return 0, false, fmt.Errorf("--data %s: synthetic data cannot be mixed with shards; pass --data synthetic alone (or ./synthetic for a file of that name)", strings.Join(patterns, ","))
	}
	return vocab, found, nil
}

// syntheticModel sizes m's vocabulary for --data synthetic:V.
func syntheticModel(m model.Config, name string, vocab int) (model.Config, error) {
	if vocab == 0 || vocab == m.V {
		return m, nil
	}
	if _, preset := model.Preset(name); preset {
		m.V, m.Vp = vocab, model.PadVocab(vocab)
		return m, nil
	}
	if vocab > m.V {
		return m, fmt.Errorf("--data synthetic:%d: --model %s has vocab_size %d; draw at most that many ids", vocab, name, m.V)
	}
	return m, nil
}

// syntheticBatches is rank's random-token source for a run of m.
func syntheticBatches(seed uint64, rank int, m model.Config, vocab int) (trainer.BatchSource, error) {
	if vocab == 0 {
		vocab = m.V
	}
	return trainer.NewSyntheticBatches(seed, rank, vocab)
}
