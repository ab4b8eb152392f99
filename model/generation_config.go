package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gotrain/gotrain/internal/regularfile"
)

// maxGenerationConfigBytes bounds generation_config.json (a few hundred
// bytes in published snapshots).
const maxGenerationConfigBytes = 1 << 20

// GenerationEOS is the eos_token_id of dir/generation_config.json (one id
// or a list), where transformers' generate stops; nil when the file is
// absent or names none. Instruct snapshots list their end-of-turn token
// there (Qwen3: <|im_end|> and <|endoftext|>), not always in config.json.
func GenerationEOS(dir string) ([]int, error) {
	path := filepath.Join(dir, "generation_config.json")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	raw, err := regularfile.Read("generation config", path, maxGenerationConfigBytes)
	if err != nil {
		return nil, err
	}
	var doc struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("generation config %s: %w", path, err)
	}
	if len(doc.EOS) == 0 || string(doc.EOS) == "null" {
		return nil, nil
	}
	var one int
	if json.Unmarshal(doc.EOS, &one) == nil {
		return []int{one}, nil
	}
	var ids []int
	if err := json.Unmarshal(doc.EOS, &ids); err != nil {
		return nil, fmt.Errorf("generation config %s: eos_token_id %s is not an id or a list of ids", path, doc.EOS)
	}
	return ids, nil
}
