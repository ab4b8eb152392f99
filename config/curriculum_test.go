package config

import (
	"strings"
	"testing"
)

func curriculumCfg(t *testing.T, block string) *Config {
	t.Helper()
	return mustParse(t, `{"train_micro_batch_size_per_gpu": 1, "curriculum_learning": `+block+`}`, Overrides{WorldSize: 1})
}

// TestCurriculumSeqLen: the three schedules give the lengths DeepSpeed's
// CurriculumScheduler computes, worked by hand from its formula
// d = ⌊(n/total)^(1/degree)·(max−min) + min⌋, rounded down to a multiple
// of difficulty_step, capped at max; fixed_discrete by its step list.
func TestCurriculumSeqLen(t *testing.T) {
	linear := curriculumCfg(t, `{"enabled": true, "curriculum_type": "seqlen", "min_difficulty": 8, "max_difficulty": 64,
		"schedule_type": "fixed_linear", "schedule_config": {"total_curriculum_step": 10, "difficulty_step": 8}}`).Curriculum
	root := curriculumCfg(t, `{"enabled": true, "curriculum_type": "seqlen", "min_difficulty": 8, "max_difficulty": 64,
		"schedule_type": "fixed_root", "schedule_config": {"total_curriculum_step": 10, "difficulty_step": 8, "root_degree": 2}}`).Curriculum
	discrete := curriculumCfg(t, `{"enabled": true, "curriculum_type": "seqlen", "min_difficulty": 8, "max_difficulty": 32,
		"schedule_type": "fixed_discrete", "schedule_config": {"difficulty": [8, 16, 32], "max_step": [2, 5]}}`).Curriculum
	for _, tc := range []struct {
		name string
		c    Curriculum
		n    []int
		want []int
	}{
		// 0.1·56+8 = 13.6 → 8; 0.5·56+8 = 36 → 32; 0.9·56+8 = 58.4 → 56; past total: 64.
		{"fixed_linear", linear, []int{1, 5, 9, 10, 25}, []int{8, 32, 56, 64, 64}},
		// √0.1·56+8 = 25.7 → 24; √0.4·56+8 = 43.4 → 40; √0.9·56+8 = 61.1 → 56.
		{"fixed_root", root, []int{1, 4, 9, 10}, []int{24, 40, 56, 64}},
		{"fixed_discrete", discrete, []int{1, 2, 3, 5, 6, 100}, []int{8, 8, 16, 16, 32, 32}},
	} {
		for i, n := range tc.n {
			if got := tc.c.SeqLen(n); got != tc.want[i] {
				t.Errorf("%s: step %d: seq len %d, want %d", tc.name, n, got, tc.want[i])
			}
		}
	}
	if c := curriculumCfg(t, `{"enabled": false, "curriculum_type": "seqlen"}`).Curriculum; c.Enabled {
		t.Error("a disabled block is enabled")
	}
}

// TestCurriculumRefusals: what DeepSpeed asserts, and what would give a
// length below 1 or a type gotrain does not run, is an error naming the key.
func TestCurriculumRefusals(t *testing.T) {
	const lin = `"schedule_type": "fixed_linear", "schedule_config": {"total_curriculum_step": 10, "difficulty_step": 8}`
	for _, tc := range []struct{ block, path, want string }{
		{`{"enabled": true, "curriculum_type": "vocab", "min_difficulty": 8, "max_difficulty": 64, ` + lin + `}`, "curriculum_learning.curriculum_type", "seqlen"},
		{`{"enabled": true, "min_difficulty": 8, "max_difficulty": 64, ` + lin + `}`, "curriculum_learning.curriculum_type", "missing"},
		{`{"enabled": true, "curriculum_type": "seqlen", "min_difficulty": 8, "max_difficulty": 64}`, "curriculum_learning.schedule_type", "missing"},
		{`{"enabled": true, "curriculum_type": "seqlen", "min_difficulty": 8, "max_difficulty": 64, "schedule_type": "fixed_linear"}`,
			"curriculum_learning.schedule_config.total_curriculum_step", "missing"},
		{`{"enabled": true, "curriculum_type": "seqlen", "min_difficulty": 4, "max_difficulty": 64, ` + lin + `}`,
			"curriculum_learning.schedule_config.difficulty_step", "sequence length 0"},
		{`{"enabled": true, "curriculum_type": "seqlen", "min_difficulty": 80, "max_difficulty": 64, ` + lin + `}`, "curriculum_learning.min_difficulty", "above max_difficulty"},
		{`{"enabled": true, "curriculum_type": "seqlen", "min_difficulty": 8, "max_difficulty": 64, "schedule_type": "fixed_root",
			"schedule_config": {"total_curriculum_step": 10, "difficulty_step": 8}}`, "curriculum_learning.schedule_config.root_degree", "missing"},
		{`{"enabled": true, "curriculum_type": "seqlen", "min_difficulty": 8, "max_difficulty": 64, "schedule_type": "fixed_discrete",
			"schedule_config": {"difficulty": [8, 64], "max_step": [2, 5]}}`, "curriculum_learning.schedule_config.max_step", "one fewer"},
		{`{"enabled": true, "curriculum_type": "seqlen", "min_difficulty": 8, "max_difficulty": 64, "schedule_type": "fixed_discrete",
			"schedule_config": {"difficulty": [8, 16.5, 64], "max_step": [2, 5]}}`, "curriculum_learning.schedule_config.difficulty", "whole number"},
		{`{"enabled": true, "curriculum_type": "seqlen", "min_difficulty": 8, "max_difficulty": 64, "schedule_type": "fixed_discrete",
			"schedule_config": {"difficulty": [8, 16, 64], "max_step": [5, 2]}}`, "curriculum_learning.schedule_config.max_step", "must increase"},
	} {
		_, es := parseCfg(t, `{"train_micro_batch_size_per_gpu": 1, "curriculum_learning": `+tc.block+`}`, Options{Strict: true, Overrides: Overrides{WorldSize: 1}})
		e := errAt(es, tc.path)
		if e == nil || !strings.Contains(e.Error(), tc.want) {
			t.Errorf("%s: no error at %s mentioning %q; errors:\n%v", tc.block, tc.path, tc.want, es)
		}
	}
}
