package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Batch is the resolved batch triangle for one data-parallel world size:
// TrainBatchSize = MicroBatch × GradAccum × WorldSize.
type Batch struct {
	TrainBatchSize int      // samples per optimizer step, over all ranks
	MicroBatch     int      // samples per rank per micro-step (train_micro_batch_size_per_gpu)
	GradAccum      int      // micro-steps per optimizer step (gradient_accumulation_steps)
	WorldSize      int      // data-parallel ranks
	Inferred       []string // keys filled by DeepSpeed's inference rules rather than the file
}

// Resolve applies DeepSpeed's batch inference (_set_batch_related_parameters, deepspeed-semantics §1.1) for a
// data-parallel world size: the missing keys are filled by integer division, then the invariant
// train_batch_size == micro × gas × world_size is checked. Errors say what was inferred, why it fails, and
// values that would work. Resolve does not modify c.
func (c *Config) Resolve(worldSize int) (Batch, error) {
	r := batchResolver{c: c, ws: worldSize}
	return r.resolve()
}

type batchResolver struct {
	c    *Config
	ws   int
	errs Errors
}

const (
	keyTBS   = "train_batch_size"
	keyMicro = "train_micro_batch_size_per_gpu"
	keyGAS   = "gradient_accumulation_steps"
)

func (r *batchResolver) fail(path, msg, fix string) {
	e := &Error{File: r.c.File, Path: path, Msg: msg, Fix: fix}
	if ent := r.c.entries[path]; ent != nil && ent.given {
		e.Line, e.Col = ent.line, ent.col
	}
	r.errs = append(r.errs, e)
}

func (r *batchResolver) resolve() (Batch, error) {
	c, ws := r.c, r.ws
	if ws < 1 {
		r.fail("", fmt.Sprintf("the data-parallel world size must be at least 1, got %d", ws), "pass --nproc N with N ≥ 1")
		return Batch{}, r.errs
	}
	tbs, micro, gas := c.TrainBatchSize, c.TrainMicroBatchSizePerGPU, c.GradientAccumulationSteps
	if f, ok := c.tbsAuto.Get(); ok {
		// Hugging Face fills "auto" with world_size × per_device_train_batch_size × gradient_accumulation_steps.
		tbs = Some(mulSat(mulSat(ws, f[0]), f[1]))
	}
	if r.checkKeys(tbs); len(r.errs) > 0 {
		return Batch{}, r.errs
	}
	b := Batch{WorldSize: ws}
	T, M, G := tbs.V, micro.V, gas.V
	switch {
	case tbs.Set && micro.Set && gas.Set:
		b.TrainBatchSize, b.MicroBatch, b.GradAccum = T, M, G
		if T != mulSat(mulSat(M, G), ws) {
			r.mismatch(T, M, G)
		}
	case tbs.Set && micro.Set:
		G = T / M / ws
		b.TrainBatchSize, b.MicroBatch, b.GradAccum, b.Inferred = T, M, G, []string{keyGAS}
		if G <= 0 || T != mulSat(mulSat(M, G), ws) {
			r.gasInferenceFails(T, M, G)
		}
	case tbs.Set && gas.Set:
		M = T / ws / G
		b.TrainBatchSize, b.MicroBatch, b.GradAccum, b.Inferred = T, M, G, []string{keyMicro}
		if M <= 0 || T != mulSat(mulSat(M, G), ws) {
			r.microInferenceFails(T, G, M)
		}
	case micro.Set && gas.Set:
		b.TrainBatchSize, b.MicroBatch, b.GradAccum, b.Inferred = mulSat(mulSat(M, G), ws), M, G, []string{keyTBS}
	case tbs.Set:
		G, M = 1, T/ws
		b.TrainBatchSize, b.MicroBatch, b.GradAccum, b.Inferred = T, M, G, []string{keyMicro, keyGAS}
		if M <= 0 || T != mulSat(M, ws) {
			r.onlyTBSFails(T, M)
		}
	case micro.Set:
		G = 1
		b.TrainBatchSize, b.MicroBatch, b.GradAccum, b.Inferred = mulSat(M, ws), M, G, []string{keyTBS, keyGAS}
	}
	if len(r.errs) > 0 {
		return Batch{}, r.errs
	}
	return b, nil
}

// checkKeys applies the checks that do not depend on the world size: given values are positive, and at least
// one of train_batch_size and train_micro_batch_size_per_gpu is given.
func (r *batchResolver) checkKeys(tbs Opt[int]) {
	c := r.c
	for _, k := range []struct {
		path string
		v    Opt[int]
		name string
	}{{keyTBS, tbs, "Train batch size"}, {keyMicro, c.TrainMicroBatchSizePerGPU, "Micro batch size per gpu"}, {keyGAS, c.GradientAccumulationSteps, "Gradient accumulation steps"}} {
		if v, ok := k.v.Get(); ok && v <= 0 {
			r.fail(k.path, fmt.Sprintf("%s: %d has to be greater than 0", k.name, v), "use a positive integer")
		}
	}
	if !tbs.Set && !c.TrainMicroBatchSizePerGPU.Set {
		r.fail(keyMicro, "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided",
			"add \"train_micro_batch_size_per_gpu\": <samples per rank> (or \"auto\"); train_batch_size is then inferred")
	}
}

// checkBatchKeys is checkKeys for a config whose world size is not known yet.
func (c *Config) checkBatchKeys() Errors {
	r := batchResolver{c: c}
	tbs := c.TrainBatchSize
	if c.tbsAuto.Set {
		tbs = Some(1) // "auto" is always positive once a world size is known
	}
	r.checkKeys(tbs)
	return r.errs
}

// deepspeedCheck is DeepSpeed's own assertion text, kept so that users can search for it.
func deepspeedCheck(t, m, g, ws int) string {
	return fmt.Sprintf("DeepSpeed: train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * world_size %d != %d * %d * %d", t, m, g, ws)
}

func (r *batchResolver) mismatch(t, m, g int) {
	ws := r.ws
	msg := fmt.Sprintf("train_batch_size %d != train_micro_batch_size_per_gpu %d × gradient_accumulation_steps %d × world size %d = %d (%s)",
		t, m, g, ws, mulSat(mulSat(m, g), ws), deepspeedCheck(t, m, g, ws))
	fixes := []string{fmt.Sprintf("set train_batch_size to %d", mulSat(mulSat(m, g), ws)), "remove train_batch_size so that it is inferred"}
	if t%mulSat(m, ws) == 0 {
		fixes = append(fixes, fmt.Sprintf("set gradient_accumulation_steps to %d", t/mulSat(m, ws)))
	}
	if t%mulSat(m, g) == 0 && t/mulSat(m, g) != ws {
		// The most reported cause (complaint #11) is a wrong world size rather than a wrong file.
		fixes = append(fixes, fmt.Sprintf("or run on a world size of %d (the file was written for it)", t/mulSat(m, g)))
	}
	r.fail(keyTBS, msg, strings.Join(fixes, ", "))
}

func (r *batchResolver) gasInferenceFails(t, m, g int) {
	ws := r.ws
	unit := mulSat(m, ws)
	msg := fmt.Sprintf("train_batch_size %d is not a multiple of train_micro_batch_size_per_gpu × world size = %d × %d = %d: DeepSpeed infers gradient_accumulation_steps = %d // %d // %d = %d and then fails (%s)",
		t, m, ws, unit, t, m, ws, g, deepspeedCheck(t, m, g, ws))
	fixes := []string{"set train_batch_size to " + orList(nearMultiples(t, unit))}
	if t%ws == 0 {
		fixes = append(fixes, fmt.Sprintf("set train_micro_batch_size_per_gpu to a divisor of %d/%d = %d such as %s", t, ws, t/ws, orList(divisorsNear(t/ws, m))))
	} else {
		fixes = append(fixes, fmt.Sprintf("note that no micro batch works: %d is not a multiple of the world size %d", t, ws))
	}
	r.fail(keyTBS, msg, strings.Join(fixes, ", or "))
}

func (r *batchResolver) microInferenceFails(t, g, m int) {
	ws := r.ws
	unit := mulSat(ws, g)
	msg := fmt.Sprintf("train_batch_size %d is not a multiple of world size × gradient_accumulation_steps = %d × %d = %d: DeepSpeed infers train_micro_batch_size_per_gpu = %d // %d // %d = %d and then fails (%s)",
		t, ws, g, unit, t, ws, g, m, deepspeedCheck(t, m, g, ws))
	fixes := []string{"set train_batch_size to " + orList(nearMultiples(t, unit))}
	if t%ws == 0 {
		fixes = append(fixes, fmt.Sprintf("set gradient_accumulation_steps to a divisor of %d/%d = %d such as %s", t, ws, t/ws, orList(divisorsNear(t/ws, g))))
	}
	r.fail(keyTBS, msg, strings.Join(fixes, ", or "))
}

func (r *batchResolver) onlyTBSFails(t, m int) {
	ws := r.ws
	msg := fmt.Sprintf("train_batch_size %d is not a multiple of the world size %d: DeepSpeed infers train_micro_batch_size_per_gpu = %d // %d = %d with gradient_accumulation_steps 1 and then fails (%s)",
		t, ws, t, ws, m, deepspeedCheck(t, m, 1, ws))
	fix := fmt.Sprintf("set train_batch_size to %s, or run on a world size that divides %d such as %s",
		orList(nearMultiples(t, ws)), t, orList(divisorsNear(t, ws)))
	r.fail(keyTBS, msg, fix)
}

// mulSat multiplies positive sizes, saturating instead of wrapping so that absurd inputs give sane messages.
func mulSat(a, b int) int {
	if a <= 0 || b <= 0 {
		return a * b
	}
	if a > math.MaxInt/b {
		return math.MaxInt
	}
	return a * b
}

// nearMultiples returns the positive multiples of unit just below and above x.
func nearMultiples(x, unit int) []int {
	lo := x / unit * unit
	if lo <= 0 {
		return []int{unit}
	}
	return []int{lo, lo + unit}
}

// divisorsNear returns up to four divisors of n, those closest to near first, then sorted.
func divisorsNear(n, near int) []int {
	var ds []int
	// The bound keeps this cheap for absurd sizes; real batch sizes are far below it.
	for i := 1; i*i <= n && i <= 1<<16; i++ {
		if n%i == 0 {
			ds = append(ds, i)
			if i != n/i {
				ds = append(ds, n/i)
			}
		}
	}
	dist := func(a int) int {
		if a > near {
			return a - near
		}
		return near - a
	}
	// Selection by distance keeps the suggestion relevant for large batch sizes with many divisors.
	for i := 0; i < len(ds); i++ {
		for j := i + 1; j < len(ds); j++ {
			if dist(ds[j]) < dist(ds[i]) || (dist(ds[j]) == dist(ds[i]) && ds[j] < ds[i]) {
				ds[i], ds[j] = ds[j], ds[i]
			}
		}
	}
	if len(ds) > 4 {
		ds = ds[:4]
	}
	for i := 0; i < len(ds); i++ {
		for j := i + 1; j < len(ds); j++ {
			if ds[j] < ds[i] {
				ds[i], ds[j] = ds[j], ds[i]
			}
		}
	}
	return ds
}

func orList(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
