package hftok

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// Config is what gotrain reads of tokenizer_config.json, the transformers
// file beside tokenizer.json.
type Config struct {
	// Present is true when a tokenizer_config.json was read.
	Present bool
	// BOS, EOS, PAD and UNK are bos_token, eos_token, pad_token and
	// unk_token; their ids are filled in by Load (-1 when the token is
	// null or absent).
	BOS, EOS, PAD, UNK Special
	// AddBOSToken and AddEOSToken are add_bos_token and add_eos_token (nil
	// when absent). Only transformers' Llama (2) tokenizer classes rebuild
	// the post-processor from them; gotrain records them and adds what
	// tokenizer.json's post-processor adds.
	AddBOSToken, AddEOSToken *bool
	// CleanUpTokenizationSpaces is clean_up_tokenization_spaces (see
	// CleanUpTokenizationSpaces).
	CleanUpTokenizationSpaces bool
	// ChatTemplate is the default chat template (Jinja source), from
	// chat_template, or from a chat_template.jinja file the caller read.
	// Rendering it is not this package's work.
	ChatTemplate string
	// ChatTemplates are named templates, when chat_template is a list of
	// {name, template}; the one named "default" is also ChatTemplate.
	ChatTemplates map[string]string
	// ModelMaxLength is model_max_length; 0 when absent or when it is
	// transformers' "no limit" sentinel (about 1e30).
	ModelMaxLength int64
	// TokenizerClass is tokenizer_class ("Qwen2Tokenizer",
	// "PreTrainedTokenizerFast"), for messages.
	TokenizerClass string
}

// Special is a special token named by tokenizer_config.json.
type Special struct {
	Content string // "" when the token is not set
	ID      int    // -1 when the token is not set
}

// MaxConfigBytes bounds tokenizer_config.json (real ones are up to a few
// hundred KB, most of it added_tokens_decoder and chat templates).
const MaxConfigBytes = 16 << 20

// ParseConfig reads tokenizer_config.json. Token ids are resolved by Load,
// against tokenizer.json.
func ParseConfig(b []byte) (Config, error) {
	c := Config{Present: true}
	if len(b) > MaxConfigBytes {
		return c, fmt.Errorf("%d bytes, more than the %d a tokenizer_config.json may have", len(b), MaxConfigBytes)
	}
	var doc struct {
		BOS            json.RawMessage `json:"bos_token"`
		EOS            json.RawMessage `json:"eos_token"`
		PAD            json.RawMessage `json:"pad_token"`
		UNK            json.RawMessage `json:"unk_token"`
		AddBOS         *bool           `json:"add_bos_token"`
		AddEOS         *bool           `json:"add_eos_token"`
		CleanUp        *bool           `json:"clean_up_tokenization_spaces"`
		ChatTemplate   json.RawMessage `json:"chat_template"`
		ModelMaxLength *float64        `json:"model_max_length"`
		TokenizerClass *string         `json:"tokenizer_class"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return c, fmt.Errorf("not valid JSON, or a key of the wrong type: %v", err)
	}
	for _, f := range []struct {
		key string
		raw json.RawMessage
		dst *Special
	}{{"bos_token", doc.BOS, &c.BOS}, {"eos_token", doc.EOS, &c.EOS}, {"pad_token", doc.PAD, &c.PAD}, {"unk_token", doc.UNK, &c.UNK}} {
		s, err := specialContent(f.raw)
		if err != nil {
			return c, fmt.Errorf("%s: %v", f.key, err)
		}
		*f.dst = Special{Content: s, ID: -1}
	}
	c.AddBOSToken, c.AddEOSToken = doc.AddBOS, doc.AddEOS
	// Absent means false, transformers' default since v4.45 (it was true
	// before, which is why older files spell it out).
	c.CleanUpTokenizationSpaces = doc.CleanUp != nil && *doc.CleanUp
	if doc.TokenizerClass != nil {
		c.TokenizerClass = *doc.TokenizerClass
	}
	if m := doc.ModelMaxLength; m != nil && *m > 0 && *m < math.MaxInt64/2 && *m == math.Trunc(*m) {
		c.ModelMaxLength = int64(*m)
	}
	if err := c.readChatTemplate(doc.ChatTemplate); err != nil {
		return c, fmt.Errorf("chat_template: %v", err)
	}
	return c, nil
}

// specialContent reads a special-token entry: null, a string, or an
// AddedToken object ({"content": ..., "__type": "AddedToken", ...}, as
// older transformers wrote them).
func specialContent(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if raw[0] != '{' || json.Unmarshal(raw, &obj) != nil || obj.Content == nil {
		return "", fmt.Errorf(`want a string, an object with a "content" string, or null; got %.40s`, raw)
	}
	return *obj.Content, nil
}

func (c *Config) readChatTemplate(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
		return nil
	case raw[0] == '"':
		return json.Unmarshal(raw, &c.ChatTemplate)
	case raw[0] == '[':
		var list []struct {
			Name     *string `json:"name"`
			Template *string `json:"template"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			return fmt.Errorf("want a string or a list of {name, template}: %v", err)
		}
		c.ChatTemplates = make(map[string]string, len(list))
		for i, e := range list {
			if e.Name == nil || e.Template == nil {
				return fmt.Errorf("entry %d lacks a name or a template string", i)
			}
			c.ChatTemplates[*e.Name] = *e.Template
		}
		c.ChatTemplate = c.ChatTemplates["default"]
		return nil
	}
	return fmt.Errorf("want a string or a list of {name, template}, got %.40s", raw)
}
