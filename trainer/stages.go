package trainer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/checkpoint"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/internal/didyoumean"
	"github.com/gotrain/gotrain/model"
)

// A curriculum (train --stages FILE) is a list of stages run one after
// the other as one training run: each stage is one Run with its own data,
// sequence length, length and learning-rate scale. Steps are numbered
// across the stages (stage 2 of 100+50 steps runs steps 101..150), so the
// scheduler, AdamW's moments and bias correction, the loss scaler and the
// token count simply continue. A stage starts by resuming the previous
// stage's final checkpoint (written at its last step, as every Run's is)
// with a fresh data position; a stage is resumed inside like any run. Each
// checkpoint records its stage (trainerState.Stage in meta.json).

// Stage is one entry of a stages file. Exactly one of Steps and Epochs is
// set in the file; ResolveStages turns Epochs into Steps.
type Stage struct {
	Name    string   `json:"name"`
	Data    []string `json:"data"`     // token shards: paths or globs, relative to the stages file
	ValData []string `json:"val_data"` // optional; none: the run's --val-data
	SeqLen  int      `json:"seq_len"`
	Steps   int      `json:"steps"`
	Epochs  float64  `json:"epochs"`
	// LRScale multiplies the scheduled learning rate during the stage
	// (the schedule itself runs across all stages); 0 in a parsed Stage
	// means the file did not set it, which is 1.
	LRScale float64 `json:"lr_scale"`
	Pack    *bool   `json:"pack"` // nil: the run's --pack
}

// stageKeys are the keys a stage may have, in the order the docs list them.
var stageKeys = []string{"name", "data", "val_data", "seq_len", "steps", "epochs", "lr_scale", "pack"}

// ParseStages reads a stages file: {"stages": [{...}, ...]}. Relative data
// paths are taken relative to dir (the file's directory). Every error names
// the file, the stage (number and name) and the key, and says what to
// write instead. Nothing is checked against the disk or a model here
// (ValidateStages does that).
func ParseStages(name, dir string, b []byte) ([]Stage, error) {
	var top map[string]json.RawMessage
	if err := strictJSON(b, &top); err != nil {
		return nil, fmt.Errorf("stages file %s: %w (want {\"stages\": [{\"data\": [...], \"seq_len\": N, \"steps\": N}, ...]})", name, err)
	}
	for k := range top {
		if k != "stages" {
			return nil, fmt.Errorf("stages file %s: unknown key %q; the file holds one key, \"stages\", a list of stages", name, k)
		}
	}
	var raws []json.RawMessage
	if err := strictJSON(top["stages"], &raws); err != nil || len(raws) == 0 {
		return nil, fmt.Errorf("stages file %s: \"stages\" must be a non-empty list of stages", name)
	}
	stages := make([]Stage, len(raws))
	seen := map[string]int{}
	for i, raw := range raws {
		s, err := parseStage(raw, i)
		if err != nil {
			return nil, fmt.Errorf("stages file %s: %w", name, err)
		}
		if j, dup := seen[s.Name]; dup {
			return nil, fmt.Errorf("stages file %s: stages %d and %d are both named %q; give each stage its own \"name\"", name, j+1, i+1, s.Name)
		}
		seen[s.Name] = i
		for k, p := range s.Data {
			s.Data[k] = relTo(dir, p)
		}
		for k, p := range s.ValData {
			s.ValData[k] = relTo(dir, p)
		}
		stages[i] = s
	}
	return stages, nil
}

// parseStage decodes and checks stage i's keys and values.
func parseStage(raw json.RawMessage, i int) (Stage, error) {
	var keys map[string]json.RawMessage
	where := fmt.Sprintf("stage %d", i+1)
	if err := strictJSON(raw, &keys); err != nil {
		return Stage{}, fmt.Errorf("%s: %w (a stage is an object such as {\"data\": [\"train_*.bin\"], \"seq_len\": 128, \"steps\": 100})", where, err)
	}
	var s Stage
	if n, ok := keys["name"]; ok {
		if err := strictJSON(n, &s.Name); err != nil || strings.TrimSpace(s.Name) == "" {
			return Stage{}, fmt.Errorf("%s: \"name\" must be a non-empty string", where)
		}
		where = fmt.Sprintf("stage %d (%q)", i+1, s.Name)
	} else {
		s.Name = "stage" + strconv.Itoa(i+1)
	}
	for _, k := range sortedKeys(keys) {
		if !slices.Contains(stageKeys, k) {
			return Stage{}, fmt.Errorf("%s: unknown key %q%s; a stage's keys are %s", where, k, closest(k, stageKeys), strings.Join(stageKeys, ", "))
		}
		var err error
		v := keys[k]
		switch k {
		case "data", "val_data":
			var l []string
			if err = strictJSON(v, &l); err == nil && len(l) == 0 {
				err = errors.New("is empty")
			}
			if k == "data" {
				s.Data = l
			} else {
				s.ValData = l
			}
		case "seq_len":
			err = strictJSON(v, &s.SeqLen)
		case "steps":
			err = strictJSON(v, &s.Steps)
		case "epochs":
			err = strictJSON(v, &s.Epochs)
		case "lr_scale":
			err = strictJSON(v, &s.LRScale)
		case "pack":
			s.Pack = new(bool)
			err = strictJSON(v, s.Pack)
		}
		if err != nil {
			return Stage{}, fmt.Errorf("%s: %q: %w (%s)", where, k, err, stageKeyHelp(k))
		}
	}
	_, hasSteps := keys["steps"]
	_, hasEpochs := keys["epochs"]
	_, hasScale := keys["lr_scale"]
	switch {
	case len(s.Data) == 0:
		return Stage{}, fmt.Errorf("%s: \"data\" is missing (%s)", where, stageKeyHelp("data"))
	case s.SeqLen < 1:
		return Stage{}, fmt.Errorf("%s: \"seq_len\" is missing or below 1 (%s)", where, stageKeyHelp("seq_len"))
	case hasSteps == hasEpochs:
		return Stage{}, fmt.Errorf("%s: set exactly one of \"steps\" and \"epochs\"", where)
	case hasSteps && s.Steps < 1:
		return Stage{}, fmt.Errorf("%s: \"steps\" is %d (%s)", where, s.Steps, stageKeyHelp("steps"))
	case hasEpochs && !(s.Epochs > 0 && !math.IsInf(s.Epochs, 0)):
		return Stage{}, fmt.Errorf("%s: \"epochs\" is %v (%s)", where, s.Epochs, stageKeyHelp("epochs"))
	case hasScale && !(s.LRScale > 0 && !math.IsInf(s.LRScale, 0)):
		return Stage{}, fmt.Errorf("%s: \"lr_scale\" is %v (%s)", where, s.LRScale, stageKeyHelp("lr_scale"))
	}
	if !hasScale {
		s.LRScale = 1
	}
	return s, nil
}

// stageKeyHelp says what a stage key takes.
func stageKeyHelp(k string) string {
	switch k {
	case "name":
		return "a non-empty string"
	case "data", "val_data":
		return "a non-empty list of token shard paths or globs, relative to the stages file"
	case "seq_len":
		return "the stage's sequence length T, an integer from 1 to the model's context"
	case "steps":
		return "the stage's optimizer steps, an integer ≥ 1"
	case "epochs":
		return "passes over the stage's data, a number > 0"
	case "lr_scale":
		return "a number > 0 that multiplies the scheduled learning rate during the stage"
	case "pack":
		return "true or false"
	}
	return ""
}

// closest suggests the key k was probably meant to be, as config keys and
// flags are suggested.
func closest(k string, keys []string) string {
	if c := didyoumean.Suggest(k, keys); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

// strictJSON decodes one JSON value with nothing after it.
func strictJSON(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return errors.New("no value")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("unexpected data after the value")
	}
	return nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// relTo makes a relative path relative to dir.
func relTo(dir, p string) string {
	if dir == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// CheckStageData checks that every stage's data and val_data name shard
// files, naming the stage and the key when one does not.
func CheckStageData(stages []Stage) error {
	for i, s := range stages {
		if _, err := data.ResolveShards(s.Data); err != nil {
			return fmt.Errorf("stage %d (%q): \"data\": %w", i+1, s.Name, err)
		}
		if len(s.ValData) > 0 {
			if _, err := data.ResolveShards(s.ValData); err != nil {
				return fmt.Errorf("stage %d (%q): \"val_data\": %w", i+1, s.Name, err)
			}
		}
	}
	return nil
}

// StagePlan is what ResolveStages needs to check stages and count their steps.
type StagePlan struct {
	Model     model.Config
	Batch     config.Batch
	Rank      int
	Pack      bool // the run's --pack, for stages that do not set "pack"
	Shuffle   bool
	ValData   []string // the run's --val-data, for stages without "val_data"
	OutputDir string
}

// ResolveStages checks every stage against the model and the disk (its
// sequence length fits the model's context, its shards exist and hold a
// batch) and turns epochs into steps as --num-train-epochs does:
// ceil(E × ⌊micro-batches per epoch / gradient accumulation⌋).
func ResolveStages(stages []Stage, p StagePlan) ([]Stage, error) {
	if p.OutputDir == "" {
		return nil, errors.New("--stages needs --output-dir: each stage starts from the previous stage's final checkpoint there")
	}
	if err := CheckStageData(stages); err != nil {
		return nil, err
	}
	out := slices.Clone(stages)
	for i := range out {
		s := &out[i]
		where := fmt.Sprintf("stage %d (%q)", i+1, s.Name)
		if err := p.Model.CheckSeqLen(s.SeqLen); err != nil {
			return nil, fmt.Errorf("%s: \"seq_len\": %w; lower the stage's seq_len", where, err)
		}
		if len(s.ValData) == 0 {
			s.ValData = p.ValData
		}
		if s.Pack == nil {
			s.Pack = &p.Pack
		}
		l, err := data.NewLoader(data.LoaderOptions{Shards: s.Data, B: p.Batch.MicroBatch, T: s.SeqLen,
			Rank: p.Rank, WorldSize: p.Batch.WorldSize, Vocab: p.Model.V, Pack: *s.Pack, Shuffle: p.Shuffle})
		if err != nil {
			return nil, fmt.Errorf("%s: \"data\": %w", where, err)
		}
		perEpoch := max(1, l.BatchesPerEpoch()/int64(max(1, p.Batch.GradAccum)))
		l.Close()
		if s.Epochs > 0 {
			s.Steps = int(math.Ceil(s.Epochs * float64(perEpoch)))
		}
	}
	return out, nil
}

// TotalSteps is the number of optimizer steps of all stages together (what
// fills the scheduler's "auto" total_num_steps).
func TotalSteps(stages []Stage) int {
	n := 0
	for _, s := range stages {
		n += s.Steps
	}
	return n
}

// StageInfo is the stage a Run trains (Options.Stage).
type StageInfo struct {
	Index, Count int    // 0-based index among Count stages
	Name         string //
	FirstStep    int    // the stage's steps are FirstStep..Options.MaxSteps
	LRScale      float64
	// Plan digests every stage's settings, so a resume under an edited
	// stages file is noticed (a run field).
	Plan string
}

// stageState is the stage recorded in a checkpoint's trainer state.
type stageState struct {
	Index     int    `json:"index"` // 0-based
	Count     int    `json:"count"`
	Name      string `json:"name"`
	FirstStep int    `json:"first_step"`
	LastStep  int    `json:"last_step"`
}

// stageOwned are the run fields a stage sets: they differ between the
// previous stage's final checkpoint and the stage that resumes it.
var stageOwned = []string{"stage", "stage.lr_scale", "seq_len", "max_steps", "data", "val_data", "pack"}

// planDigest identifies a resolved list of stages.
func planDigest(stages []Stage) string {
	b, _ := json.Marshal(stages)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// StageOptions is the Run options of stage k: base with the stage's data,
// sequence length, last step and learning-rate scale.
func StageOptions(base Options, stages []Stage, k int) Options {
	o := base
	s := stages[k]
	first := TotalSteps(stages[:k]) + 1
	o.Data, o.ValData, o.SeqLen, o.MaxSteps = s.Data, s.ValData, s.SeqLen, first-1+s.Steps
	if s.Pack != nil {
		o.Pack = *s.Pack
	}
	o.Stage = &StageInfo{Index: k, Count: len(stages), Name: s.Name, FirstStep: first, LRScale: s.LRScale, Plan: planDigest(stages)}
	return o
}

// RunStages trains the stages in order as one run (see the comment at the
// top of this file). Where it starts is decided from what base.Resume
// would resume: nothing (stage 1 from step 1), a checkpoint inside a stage
// (that stage, at the checkpoint's data position), or a stage's final
// checkpoint (the next stage, at the start of its data). The Result
// covers every stage this process trained.
func RunStages(ctx context.Context, be backend.Backend, base Options, stages []Stage) (*Result, error) {
	if len(stages) == 0 {
		return nil, errors.New("--stages: no stages")
	}
	if base.OutputDir == "" {
		return nil, errors.New("--stages needs --output-dir: each stage starts from the previous stage's final checkpoint there")
	}
	k, resume, err := stageToStart(base, stages)
	if err != nil {
		return nil, err
	}
	var total *Result
	for ; k < len(stages); k++ {
		o := StageOptions(base, stages, k)
		if resume != "" {
			o.Resume, o.Overwrite = resume, false
		}
		if total != nil {
			o.Ready = nil // the memory table is printed once
		}
		fmt.Fprintf(logOf(o), "stage %d/%d %q: steps %d..%d, seq_len %d, lr scale %g, data %s\n",
			k+1, len(stages), o.Stage.Name, o.Stage.FirstStep, o.MaxSteps, o.SeqLen, o.Stage.LRScale, strings.Join(o.Data, " "))
		res, err := Run(ctx, be, o)
		total = mergeResults(total, res)
		if err != nil {
			return total, err
		}
		resume = filepath.Join(checkpoint.Dir(base.OutputDir), checkpoint.TagName(int64(o.MaxSteps)))
	}
	return total, nil
}

// logOf is the writer a Run with o speaks on (rank 0's Log).
func logOf(o Options) io.Writer {
	if o.Log == nil || (o.Comm != nil && o.Comm.Rank() != 0) {
		return io.Discard
	}
	return o.Log
}

// stageToStart finds the stage to run first and the checkpoint it resumes
// ("" keeps base.Resume: a fresh start, or Run's own refusal).
func stageToStart(base Options, stages []Stage) (int, string, error) {
	ck, err := checkpoint.OpenForResume(checkpoint.ResumeOptions{OutputDir: base.OutputDir, Resume: base.Resume, Overwrite: base.Overwrite})
	if err != nil {
		return 0, "", fmt.Errorf("--resume: %w", err)
	}
	if ck == nil {
		return 0, "", nil
	}
	defer ck.Close()
	meta := ck.Meta()
	var ts trainerState
	if err := json.Unmarshal(meta.DataPosition, &ts); err != nil {
		return 0, "", fmt.Errorf("--resume %s: trainer state: %w", ck.Tag(), err)
	}
	tagDir := filepath.Join(ck.Dir(), ck.Tag())
	if ts.Stage == nil {
		return 0, "", fmt.Errorf("--resume %s: the checkpoint was not written by a --stages run; start the curriculum from its weights with --init-from (gotrain checkpoint export writes them), or resume it without --stages", ck.Tag())
	}
	j, step := ts.Stage.Index, int(meta.Step)
	if j >= len(stages) {
		return 0, "", fmt.Errorf("--resume %s: the checkpoint is in stage %d (%q) but the stages file lists %d stages; pass the stages file the run started with", ck.Tag(), j+1, ts.Stage.Name, len(stages))
	}
	first := TotalSteps(stages[:j]) + 1
	last := first - 1 + stages[j].Steps
	if step < first-1 || step > last {
		return 0, "", fmt.Errorf("--resume %s: the checkpoint is at step %d of stage %d (%q), but the stages file gives that stage steps %d..%d; pass the stages file the run started with",
			ck.Tag(), step, j+1, ts.Stage.Name, first, last)
	}
	if step == last && j+1 < len(stages) {
		return j + 1, tagDir, nil
	}
	return j, tagDir, nil
}

// mergeResults adds stage result b to the run's result a.
func mergeResults(a, b *Result) *Result {
	if b == nil {
		return a
	}
	if a == nil {
		c := *b
		return &c
	}
	c := *b
	c.StartStep, c.ResumedFrom, c.FirstLoss, c.FirstValLoss = a.StartStep, a.ResumedFrom, a.FirstLoss, a.FirstValLoss
	if b.Steps < b.StartStep { // nothing trained in b (a finished stage)
		c.FinalLoss, c.Steps = a.FinalLoss, max(a.Steps, b.Steps)
	}
	if math.IsNaN(b.FinalValLoss) {
		c.FinalValLoss = a.FinalValLoss
	}
	return &c
}

// enteringStage reports whether resuming a checkpoint with stage state
// st enters this run's stage from the previous stage's final checkpoint
// (true), resumes inside it (false), or does not fit this run (an error).
func (r *run) enteringStage(tag string, step int, st *stageState) (bool, error) {
	cur := r.o.Stage
	switch {
	case cur == nil && st == nil:
		return false, nil
	case cur == nil:
		return false, fmt.Errorf("--resume %s: the checkpoint is in stage %d (%q) of a --stages run; resume it with the same --stages file", tag, st.Index+1, st.Name)
	case st == nil:
		return false, fmt.Errorf("--resume %s: the checkpoint was not written by a --stages run; start the curriculum from its weights with --init-from instead", tag)
	case st.Index == cur.Index:
		return false, nil
	case st.Index == cur.Index-1 && step == cur.FirstStep-1:
		return true, nil
	}
	return false, fmt.Errorf("--resume %s: the checkpoint is at step %d in stage %d (%q), which does not lead into stage %d (%q, steps %d..%d); pass the stages file the run started with",
		tag, step, st.Index+1, st.Name, cur.Index+1, cur.Name, cur.FirstStep, r.o.MaxSteps)
}

// stageState is what a checkpoint of this run records about its stage.
func (r *run) stageState() *stageState {
	s := r.o.Stage
	if s == nil {
		return nil
	}
	return &stageState{Index: s.Index, Count: s.Count, Name: s.Name, FirstStep: s.FirstStep, LastStep: r.o.MaxSteps}
}

// lrScale is the stage's learning-rate factor (1 outside a curriculum).
func (r *run) lrScale() float64 {
	if r.o.Stage == nil || r.o.Stage.LRScale == 0 {
		return 1
	}
	return r.o.Stage.LRScale
}

// stageFields are the run fields of a stage run.
func stageFields(s *StageInfo) []Field {
	if s == nil {
		return nil
	}
	return []Field{
		{Name: "stages", Value: s.Plan, Math: true},
		{Name: "stage", Value: fmt.Sprintf("%d of %d (%s)", s.Index+1, s.Count, s.Name), Math: true},
		{Name: "stage.lr_scale", Value: strconv.FormatFloat(s.LRScale, 'g', -1, 64), Math: true},
	}
}

// stageNote tags a saved checkpoint's line with its stage.
func (r *run) stageNote(step int) string {
	s := r.o.Stage
	switch {
	case s == nil:
		return ""
	case step == r.o.MaxSteps:
		return fmt.Sprintf(" (end of stage %d/%d %q)", s.Index+1, s.Count, s.Name)
	}
	return fmt.Sprintf(" (stage %d/%d %q)", s.Index+1, s.Count, s.Name)
}
