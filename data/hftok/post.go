package hftok

import (
	"encoding/json"
	"fmt"
)

// postStep is one post-processor that adds special tokens: the ids it puts
// before and after a single sequence. ByteLevel post-processors only adjust
// offsets, which gotrain does not compute, and add nothing.
type postStep struct {
	before, after []int
}

func (p postStep) apply(ids []int) []int {
	if len(p.before) == 0 && len(p.after) == 0 {
		return ids
	}
	out := make([]int, 0, len(p.before)+len(ids)+len(p.after))
	out = append(out, p.before...)
	out = append(out, ids...)
	return append(out, p.after...)
}

// loadPostProcessor reads TemplateProcessing, RobertaProcessing,
// BertProcessing, ByteLevel and Sequences of them. Only the single-sequence
// template matters: gotrain never encodes pairs.
func (t *Tokenizer) loadPostProcessor(raw json.RawMessage) ([]postStep, error) {
	if isNull(raw) {
		return nil, nil
	}
	var p struct {
		typed
		Processors []json.RawMessage `json:"processors"`
		Single     []struct {
			SpecialToken *struct {
				ID string `json:"id"`
			} `json:"SpecialToken"`
			Sequence *struct {
				ID string `json:"id"`
			} `json:"Sequence"`
		} `json:"single"`
		SpecialTokens map[string]struct {
			IDs []int64 `json:"ids"`
		} `json:"special_tokens"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("not a post-processor object: %v", err)
	}
	switch p.Type {
	case "ByteLevel":
		return nil, nil
	case "Sequence":
		var steps []postStep
		for i, sub := range p.Processors {
			s, err := t.loadPostProcessor(sub)
			if err != nil {
				return nil, fmt.Errorf("processors[%d]: %w", i, err)
			}
			steps = append(steps, s...)
		}
		return steps, nil
	case "TemplateProcessing":
		var st postStep
		seq := 0
		for i, piece := range p.Single {
			switch {
			case piece.Sequence != nil && piece.SpecialToken == nil:
				if piece.Sequence.ID != "A" {
					return nil, fmt.Errorf("single[%d]: sequence %q in the single-sequence template (want A)", i, piece.Sequence.ID)
				}
				seq++
			case piece.SpecialToken != nil && piece.Sequence == nil:
				sp, ok := p.SpecialTokens[piece.SpecialToken.ID]
				if !ok {
					return nil, fmt.Errorf("single[%d]: special token %q is not in special_tokens", i, piece.SpecialToken.ID)
				}
				for _, id := range sp.IDs {
					if id < 0 || !t.IsToken(int(min(id, maxVocab))) {
						return nil, fmt.Errorf("special_tokens[%q]: id %d is not a token", piece.SpecialToken.ID, id)
					}
					if seq == 0 {
						st.before = append(st.before, int(id))
					} else {
						st.after = append(st.after, int(id))
					}
				}
			default:
				return nil, fmt.Errorf("single[%d]: want one of SpecialToken or Sequence", i)
			}
		}
		if seq != 1 {
			return nil, fmt.Errorf("the single-sequence template has %d sequences, want 1", seq)
		}
		return []postStep{st}, nil
	case "RobertaProcessing", "BertProcessing":
		// {"sep": ["</s>", 2], "cls": ["<s>", 0]}: cls, the sequence, sep.
		var rb struct {
			Sep []json.RawMessage `json:"sep"`
			Cls []json.RawMessage `json:"cls"`
		}
		if err := json.Unmarshal(raw, &rb); err != nil {
			return nil, fmt.Errorf("%s: %v", p.Type, err)
		}
		cls, err := t.processorToken("cls", rb.Cls)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Type, err)
		}
		sep, err := t.processorToken("sep", rb.Sep)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Type, err)
		}
		return []postStep{{before: []int{cls}, after: []int{sep}}}, nil
	}
	return nil, fmt.Errorf("%q is not supported: gotrain reads TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel and Sequence", p.Type)
}

// processorToken reads a ["<s>", 0] pair of Roberta/BertProcessing.
func (t *Tokenizer) processorToken(key string, pair []json.RawMessage) (int, error) {
	var name string
	var id int64
	if len(pair) != 2 || json.Unmarshal(pair[0], &name) != nil || json.Unmarshal(pair[1], &id) != nil {
		return 0, fmt.Errorf(`%s: want ["token", id]`, key)
	}
	if id < 0 || !t.IsToken(int(min(id, maxVocab))) {
		return 0, fmt.Errorf("%s: id %d of %q is not a token", key, id, name)
	}
	return int(id), nil
}
