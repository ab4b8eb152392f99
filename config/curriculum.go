package config

import (
	"fmt"
	"math"
)

// Curriculum is DeepSpeed's legacy "curriculum_learning" block. gotrain
// runs curriculum_type "seqlen" as DeepSpeed with Megatron's GPT does:
// optimizer step n (1-based; DeepSpeed's update_difficulty(global_steps+1))
// cuts every sample of its micro-batches to its first Difficulty(n)
// tokens, the data position moving as for full-length samples.
type Curriculum struct {
	Enabled        bool
	Type           string // "seqlen"
	MinDifficulty  int
	MaxDifficulty  int
	ScheduleType   string // fixed_linear, fixed_root, fixed_discrete
	TotalStep      int    // fixed_linear, fixed_root: total_curriculum_step
	DifficultyStep int    // fixed_linear, fixed_root: difficulties are multiples of it
	RootDegree     int    // fixed_root
	Difficulty     []int  // fixed_discrete: the difficulties in order
	MaxStep        []int  // fixed_discrete: the last step of each difficulty but the last
}

// SeqLen is the sequence length (the difficulty) optimizer step n trains at, by
// DeepSpeed's CurriculumScheduler (deepspeed/runtime/data_pipeline/
// curriculum_scheduler.py):
//
//	fixed_discrete: difficulty[i] for the first i with n ≤ max_step[i]; the last after them
//	fixed_root:     d = ⌊(n/total)^(1/root_degree)·(max−min) + min⌋; d −= d mod difficulty_step; min(d, max)
//	fixed_linear:   fixed_root with root_degree 1
func (c Curriculum) SeqLen(n int) int {
	if c.ScheduleType == "fixed_discrete" {
		for i, m := range c.MaxStep {
			if n <= m {
				return c.Difficulty[i]
			}
		}
		return c.Difficulty[len(c.Difficulty)-1]
	}
	deg := 1.0
	if c.ScheduleType == "fixed_root" {
		deg = float64(c.RootDegree)
	}
	f := math.Pow(float64(n)/float64(c.TotalStep), 1/deg)
	d := int(math.Floor(f*float64(c.MaxDifficulty-c.MinDifficulty) + float64(c.MinDifficulty)))
	d -= d % c.DifficultyStep
	return min(d, c.MaxDifficulty)
}

func (d *decoder) buildCurriculum() Curriculum {
	const p = "curriculum_learning."
	ints := func(path string) []int {
		fs, _ := d.val(path).([]float64)
		out := make([]int, len(fs))
		for i, f := range fs {
			out[i] = int(f)
		}
		return out
	}
	return Curriculum{
		Enabled:        d.boolean(p + "enabled"),
		Type:           d.str(p + "curriculum_type"),
		MinDifficulty:  d.intv(p + "min_difficulty"),
		MaxDifficulty:  d.intv(p + "max_difficulty"),
		ScheduleType:   d.str(p + "schedule_type"),
		TotalStep:      d.intv(p + "schedule_config.total_curriculum_step"),
		DifficultyStep: d.intv(p + "schedule_config.difficulty_step"),
		RootDegree:     d.intv(p + "schedule_config.root_degree"),
		Difficulty:     ints(p + "schedule_config.difficulty"),
		MaxStep:        ints(p + "schedule_config.max_step"),
	}
}

// validateCurriculum checks an enabled block as DeepSpeed's scheduler
// asserts, and beyond it what would give a sequence length below 1 or an
// order DeepSpeed would silently misread.
func (d *decoder) validateCurriculum(c Curriculum, fail func(path, msg, fix string)) {
	if !c.Enabled {
		return
	}
	const p = "curriculum_learning."
	need := func(key, fix string) bool {
		if !d.given(p + key) {
			fail(p+key, "curriculum_learning is enabled but "+key+" is missing", fix)
			return false
		}
		return true
	}
	ok := need("curriculum_type", `add "curriculum_type": "seqlen" (the only type gotrain runs; for other curricula use train --stages)`)
	ok = need("min_difficulty", `add "min_difficulty": the first sequence length, e.g. 64`) && ok
	ok = need("max_difficulty", `add "max_difficulty": the full sequence length (--seq-len)`) && ok
	ok = need("schedule_type", `add "schedule_type": "fixed_linear", "fixed_root" or "fixed_discrete"`) && ok
	if !ok {
		return
	}
	if c.MinDifficulty > c.MaxDifficulty {
		fail(p+"min_difficulty", fmt.Sprintf("min_difficulty %d is above max_difficulty %d", c.MinDifficulty, c.MaxDifficulty), "swap the two values")
	}
	sc := p + "schedule_config."
	switch c.ScheduleType {
	case "fixed_linear", "fixed_root":
		ok := need("schedule_config.total_curriculum_step", `add "total_curriculum_step": the steps from min_difficulty to max_difficulty`)
		ok = need("schedule_config.difficulty_step", `add "difficulty_step": lengths are rounded down to a multiple of it, e.g. 8`) && ok
		if c.ScheduleType == "fixed_root" {
			ok = need("schedule_config.root_degree", `add "root_degree": 2 for a square root`) && ok
		}
		if ok && c.MinDifficulty < c.DifficultyStep {
			fail(sc+"difficulty_step", fmt.Sprintf("difficulty_step %d is above min_difficulty %d, so the first steps would round down to sequence length 0", c.DifficultyStep, c.MinDifficulty),
				"make min_difficulty a multiple of difficulty_step")
		}
	case "fixed_discrete":
		if !need("schedule_config.difficulty", `add "difficulty": the sequence lengths in order, e.g. [64, 128, 256]`) ||
			!need("schedule_config.max_step", `add "max_step": the last step of each length but the last, e.g. [1000, 2000]`) {
			return
		}
		if len(c.MaxStep) != len(c.Difficulty)-1 {
			fail(sc+"max_step", fmt.Sprintf("max_step has %d values for %d difficulties; it needs one fewer (the last difficulty runs to the end)", len(c.MaxStep), len(c.Difficulty)),
				"list the last step of every difficulty but the last")
		}
		d.checkIntList(sc+"difficulty", 1, fail)
		d.checkIntList(sc+"max_step", 1, fail)
		for i := 1; i < len(c.MaxStep); i++ {
			if c.MaxStep[i] <= c.MaxStep[i-1] {
				fail(sc+"max_step", fmt.Sprintf("max_step must increase, but %d follows %d", c.MaxStep[i], c.MaxStep[i-1]), "list the steps in increasing order")
				break
			}
		}
	}
}

// checkIntList refuses fractions and values below lo in a list of numbers.
func (d *decoder) checkIntList(path string, lo int, fail func(path, msg, fix string)) {
	fs, _ := d.val(path).([]float64)
	for _, f := range fs {
		if f != math.Trunc(f) || f < float64(lo) || f > math.MaxInt32 {
			fail(path, fmt.Sprintf("%s holds %v; every value must be a whole number ≥ %d", path[len("curriculum_learning.schedule_config."):], f, lo), "write whole numbers")
			return
		}
	}
}
