package checkpoint

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/gotrain/gotrain/model"
)

// FormatVersion is the version of the tag layout this package writes.
// Version 2 added meta.json's own checksum, the run id and the run fields;
// version 1 tags are still read (with a warning, since their meta.json
// cannot be checked).
const FormatVersion = 2

// Metadata is meta.json: everything a resume needs besides the tensors.
// The trainer fills the training fields; Finish fills Tag, WorldSize,
// Kinds, NumParams, Files and Created.
type Metadata struct {
	// Checksum is the SHA-256 of meta.json as written with this value
	// empty. It is the first key so that the reader can blank exactly its
	// value and hash the rest byte for byte (see encodeMeta).
	Checksum      string `json:"meta_sha256"`
	FormatVersion int    `json:"format_version"`
	Tag           string `json:"tag"`
	Step          int64  `json:"step"`    // optimizer steps taken
	Samples       int64  `json:"samples"` // sequences consumed, all ranks
	Tokens        int64  `json:"tokens"`  // tokens consumed, all ranks
	WorldSize     int    `json:"world_size"`
	Stage         int    `json:"zero_stage"`
	Precision     string `json:"precision"` // "fp32", "bf16" or "fp16"

	Model           ModelConfig `json:"model"`
	DeepSpeedConfig string      `json:"ds_config"` // the config file's JSON text as the run read it

	Scheduler    json.RawMessage `json:"lr_scheduler,omitempty"`
	LossScaler   json.RawMessage `json:"loss_scaler,omitempty"`
	DataPosition json.RawMessage `json:"data_position,omitempty"` // per rank, as the data loader exports it
	Seed         uint64          `json:"seed"`

	// RunID names the lineage that wrote the tag: a fresh run draws one, a
	// resumed run inherits its checkpoint's. Retention only ever deletes
	// tags of the saving run's own lineage.
	RunID string `json:"run_id"`
	// Fields are the run's resolved settings (trainer.RunFields), compared
	// on resume so a changed learning rate or batch size is never silent.
	Fields []Field `json:"run_fields,omitempty"`

	// LoRA is set in a LoRA run's tag: its files hold the adapters' state
	// (model.AdapterLayout), not the model's, and the frozen base is not in
	// the tag.
	LoRA *LoRAConfig `json:"lora,omitempty"`

	Layout    string               `json:"layout"`
	NumParams int                  `json:"num_params"`
	Kinds     []Kind               `json:"kinds"`
	Files     map[Kind]FileSummary `json:"files"`
	Created   time.Time            `json:"created"`
}

// Field is one resolved setting of the run that wrote a tag (trainer.RunFields
// lists them).
type Field struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Math  bool   `json:"math,omitempty"` // a change alters what training computes
}

// LegacyFields are the settings a meta.json without stored Fields (format
// version 1) still tells, in the form the trainer's fields have, so a
// resume can compare at least these; the train batch size is what it
// sampled per step.
func (m Metadata) LegacyFields() []Field {
	fs := []Field{
		{Name: "model", Value: m.Model.String(), Math: true},
		{Name: "precision", Value: m.Precision, Math: true},
		{Name: "world_size", Value: strconv.Itoa(m.WorldSize)},
		{Name: "config.zero_optimization.stage", Value: strconv.Itoa(m.Stage)},
	}
	if m.Step > 0 {
		fs = append(fs, Field{Name: "batch.train_batch_size", Value: strconv.FormatInt(m.Samples/m.Step, 10), Math: true})
	}
	return fs
}

// ModelConfig is the model a tag was trained as: the whole model.Config,
// recorded in meta.json by the model's own JSON form (model.Config's
// MarshalJSON), so a resume checks the full shape and architecture.
type ModelConfig model.Config

// String names the model the way the run's "model" field does.
func (m ModelConfig) String() string { return model.Config(m).Describe() }

// MarshalJSON records the config as the model package writes it; a meta
// without a model record (the zero config) writes null, which reads back
// as the zero config, so every meta.json decodeMeta accepts re-encodes.
func (m ModelConfig) MarshalJSON() ([]byte, error) {
	if model.Config(m).Arch == 0 {
		return []byte("null"), nil
	}
	return json.Marshal(model.Config(m))
}

// UnmarshalJSON reads and validates a recorded config; null is none.
func (m *ModelConfig) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		*m = ModelConfig{}
		return nil
	}
	return (*model.Config)(m).UnmarshalJSON(b)
}

// ModelConfigOf converts a model.Config.
func ModelConfigOf(c model.Config) ModelConfig { return ModelConfig(c) }

// Config converts back to a model.Config.
func (m ModelConfig) Config() model.Config { return model.Config(m) }

// FileSummary is one kind's file as Finish saw it.
type FileSummary struct {
	Name         string           `json:"name"`
	Size         int64            `json:"size"`
	HeaderCRC32C uint32           `json:"header_crc32c"` // over the length prefix and JSON
	Tensors      []TensorChecksum `json:"tensors"`       // in file order
}

// TensorChecksum is the CRC-32C (Castagnoli) of one tensor's bytes.
type TensorChecksum struct {
	Name   string `json:"name"`
	CRC32C uint32 `json:"crc32c"`
}
