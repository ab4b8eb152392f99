package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gotrain/gotrain/model"
)

// AdapterSource is a LoRA adapter on disk and the base model its files
// say it was trained on.
type AdapterSource struct {
	// Dir is the PEFT adapter directory, or the checkpoint tag directory
	// whose fp32 master values are the adapter.
	Dir string
	// Tag is set when Dir is a LoRA run's checkpoint tag.
	Tag bool
	// Base is base_model_name_or_path as recorded ("" when none is).
	Base string
	// Record is the file Base was read from, for messages.
	Record string
}

// FindAdapter reports the LoRA adapter path holds: a PEFT adapter
// directory (adapter_config.json without a model's config.json: a LoRA
// run's output directory, or an exported adapter), a LoRA run's
// checkpoint tag (global_stepN with meta.json), or a checkpoints directory
// (the tag its "latest" names). ok is false when path holds none of these
// (a model snapshot, a full run's tag).
func FindAdapter(path string) (src AdapterSource, ok bool, err error) {
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return AdapterSource{}, false, nil
	}
	if exists(filepath.Join(path, model.AdapterConfigFile)) && !exists(filepath.Join(path, "config.json")) {
		base, err := model.AdapterBaseModel(path)
		if err != nil {
			return AdapterSource{}, false, err
		}
		return AdapterSource{Dir: path, Base: base, Record: filepath.Join(path, model.AdapterConfigFile)}, true, nil
	}
	dir, tag := filepath.Dir(filepath.Clean(path)), filepath.Base(filepath.Clean(path))
	switch {
	case exists(filepath.Join(path, MetaFile)):
	case exists(filepath.Join(path, LatestFile)):
		t, _, err := readLatest(path)
		if err != nil {
			return AdapterSource{}, false, err
		}
		dir, tag = path, t
	default:
		return AdapterSource{}, false, nil
	}
	r, err := Open(dir, tag)
	if err != nil {
		return AdapterSource{}, false, err
	}
	defer r.Close()
	lora := r.Meta().LoRA
	if lora == nil {
		return AdapterSource{}, false, nil
	}
	tagDir := filepath.Join(dir, r.Tag())
	return AdapterSource{Dir: tagDir, Tag: true, Base: lora.Base, Record: filepath.Join(tagDir, MetaFile)}, true, nil
}

// exists reports whether path names something (a missing file and an
// unreadable one alike are absent; reading it later says why).
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Load reads the adapter for the base model cfg: its layout and values
// (a tag's fp32 master values, verified against their checksums). An
// adapter for another model is refused, naming both.
func (a AdapterSource) Load(cfg model.Config) (*model.AdapterLayout, []float32, error) {
	if !a.Tag {
		l, err := model.LoadAdapterConfig(a.Dir)
		if err != nil {
			return nil, nil, err
		}
		alay, err := model.NewAdapterLayout(cfg, l)
		if err != nil {
			return nil, nil, fmt.Errorf("LoRA adapter %s: %w", a.Dir, err)
		}
		vals, err := model.LoadAdapter(a.Dir, alay)
		if err != nil {
			return nil, nil, fmt.Errorf("%w (was it trained on this model?)", err)
		}
		return alay, vals, nil
	}
	r, err := Open(filepath.Dir(a.Dir), filepath.Base(a.Dir))
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	alay, vals, err := r.Adapter()
	if err != nil {
		return nil, nil, err
	}
	if got := alay.Config(); got != cfg {
		return nil, nil, fmt.Errorf("LoRA checkpoint %s was trained on %v, not on this model %v (%s)", a.Dir, got, cfg, strings.Join(got.Diff(cfg), ", "))
	}
	return alay, vals, nil
}

// BaseDir is the recorded base model as a local path that exists (a
// snapshot directory, or a weights file).
// The errors say which file recorded what, since a path recorded relative
// to another working directory does not resolve from this one.
func (a AdapterSource) BaseDir() (string, error) {
	if a.Base == "" {
		return "", fmt.Errorf("%s records no base model (base_model_name_or_path): the adapters were trained on a randomly initialised model or written elsewhere", a.Record)
	}
	_, err := os.Stat(a.Base)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !filepath.IsAbs(a.Base):
		return "", fmt.Errorf("the base model %q that %s records is not there: a relative path is taken from the working directory, and the run had another", a.Base, a.Record)
	case err != nil:
		return "", fmt.Errorf("the base model %q that %s records: %w", a.Base, a.Record, err)
	}
	return a.Base, nil
}
