package trainer

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/gotrain/gotrain/checkpoint"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/zero"
)

// trainee is what a run trains: the whole model (fullModel) or LoRA
// adapters on a frozen base (loraModel, lora.go). The run drives the
// trained parameters' engine (ZeroGrad, Step, the checkpoints' state); the
// trainee gives them their first values, checks and completes a resume,
// writes the weights and prices a token.
type trainee interface {
	// layout is what a checkpoint tag of the run holds.
	layout() checkpoint.Layout
	// init gives every parameter its first values on a fresh start: src's
	// (the --init-from weights; nil: the model's random initialisation).
	init(src model.WeightSource) error
	// check refuses checkpoint ck when it holds another kind of run's
	// state or another model's.
	check(ck *checkpoint.Reader) error
	// restore loads ck's state into the trained engine and gives what ck
	// does not hold its values from src, as init does.
	restore(ck *checkpoint.Reader, src model.WeightSource) error
	// save writes the trained weights into the output directory: at the
	// end (final) all of them, at a checkpoint what sits beside the tag.
	// Every rank takes part; rank 0 writes and returns the weights file's
	// path ("" when nothing was written).
	save(final bool) (string, error)
	// describe records in a tag's meta.json what the layout does not say.
	describe(meta *checkpoint.Metadata)
	// flopsPerToken is the training cost of a token at sequence length T,
	// which MFU divides by.
	flopsPerToken(T int) float64
	// engines are the ZeRO engines the trainee built, in the order they
	// close: the trained one first.
	engines() []*zero.Engine
}

// newTrainee builds the engines of what o trains on r's backend and Comm:
// the whole model's, or a frozen base's and its adapters'. It returns the
// trained engine and the model options that serve the parameters.
func newTrainee(r *run, lay *model.Layout, zo zero.Options) (trainee, *zero.Engine, model.Options, error) {
	mopts := model.Options{Checkpoint: r.o.Checkpoint, ActDType: zo.ParamDType}
	w := weightsOut{ctx: r.cctx, rank: r.rank, dir: r.o.OutputDir}
	if r.o.LoRA != nil {
		l, err := newLoRAModel(r, w, lay, zo, &mopts)
		if err != nil {
			return nil, nil, mopts, err
		}
		return l, l.eng, mopts, nil
	}
	eng, err := zero.New(r.cctx, r.be, r.c, zero.LayoutOf(lay), zo)
	if err != nil {
		return nil, nil, mopts, err
	}
	mopts.Store = eng
	return &fullModel{weightsOut: w, eng: eng, lay: lay, seed: r.o.Seed}, eng, mopts, nil
}

// weightsOut is where a trainee writes weights: every rank gathers them
// with ctx, rank 0 writes into dir.
type weightsOut struct {
	ctx  context.Context
	rank int
	dir  string
}

// fullModel trains every parameter of the model.
type fullModel struct {
	weightsOut
	eng  *zero.Engine
	lay  *model.Layout
	seed uint64
}

func (f *fullModel) layout() checkpoint.Layout { return f.lay }

func (f *fullModel) init(src model.WeightSource) error { return initWeights(f.eng, f.lay, f.seed, src) }

func (f *fullModel) check(ck *checkpoint.Reader) error {
	if saved := ck.Meta().LoRA; saved != nil {
		return fmt.Errorf("--resume %s: the checkpoint holds LoRA adapters (r %d, lora_alpha %g, target_modules %v); resume with the same LoRA flags, or train the merged model (gotrain checkpoint export --merge --base DIR) with --init-from",
			ck.Tag(), saved.R, saved.Alpha, saved.Target)
	}
	return checkModel(ck, f.lay)
}

func (f *fullModel) restore(ck *checkpoint.Reader, _ model.WeightSource) error {
	return restoreEngine(f.eng, ck)
}

// save writes <output-dir> as a Hugging Face snapshot
// (model.ExportSnapshot: config.json, model.safetensors or shards of at
// most 5 GB with an index, F32) at the end; a checkpoint's tag holds
// everything a full run needs.
func (f *fullModel) save(final bool) (string, error) {
	if !final {
		return "", nil
	}
	host, err := f.eng.HostParams(f.ctx)
	if err != nil || f.rank != 0 || f.dir == "" {
		return "", err
	}
	files, err := model.ExportSnapshot(f.dir, f.lay.Config(), model.SliceReader(host), model.SnapshotOptions{})
	if err != nil {
		return "", err
	}
	if len(files) > 1 {
		return filepath.Join(f.dir, "model.safetensors.index.json"), nil
	}
	return filepath.Join(f.dir, files[0]), nil
}

func (f *fullModel) describe(*checkpoint.Metadata) {}

func (f *fullModel) flopsPerToken(T int) float64 { return f.lay.Config().FlopsPerToken(T) }

func (f *fullModel) engines() []*zero.Engine { return []*zero.Engine{f.eng} }

// initWeights gives eng, which holds lay's parameters, src's weights or
// the model's random initialisation (seeded), one group at a time.
func initWeights(eng *zero.Engine, lay *model.Layout, seed uint64, src model.WeightSource) error {
	if src != nil {
		return InitParamsFrom(eng, src)
	}
	return eng.InitParams(func(g int) ([]float32, error) { return model.InitGroup(lay, seed, g), nil })
}

// checkModel refuses a checkpoint whose tensors are not lay's.
func checkModel(ck *checkpoint.Reader, lay checkpoint.Layout) error {
	if err := ck.CheckModel(lay); err != nil {
		return fmt.Errorf("--resume: %w (the checkpoint was written for another model; pass the same --model)", err)
	}
	return nil
}

// restoreEngine loads a checkpoint's state (master weights, moments) into
// eng: the ranges this rank owns, whatever world size and stage wrote it.
func restoreEngine(eng *zero.Engine, ck *checkpoint.Reader) error {
	err := eng.RestoreState(func(kind string, off, n int) ([]float32, error) {
		return ck.ReadRange(checkpoint.Kind(kind), off, n)
	})
	if err != nil {
		return fmt.Errorf("--resume %s: %w", ck.Tag(), err)
	}
	return nil
}
