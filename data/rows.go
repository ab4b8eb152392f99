package data

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// Row forms of instruction and chat data. A record (a JSON object, a
// Parquet row) is one of:
//
//	{"text"}                  plain language modelling: a document of the
//	                          token stream, as .txt files are
//	{"prompt", "completion"}  loss on the completion (and the EOS after it)
//	{"messages": [...]}       a conversation rendered with the chat
//	                          template; loss on the assistant turns
//	{"input_ids", "labels"}   pre-tokenized; labels -100 are not targets
//
// The last three are rows: each becomes one training sample (see Loader),
// and their tokens are written with a loss-mask companion.

// RowFields name the columns of the row forms.
type RowFields struct {
	Text, Prompt, Completion, Messages string
}

// Default column names.
const (
	DefaultPromptField     = "prompt"
	DefaultCompletionField = "completion"
	DefaultMessagesField   = "messages"
)

func (f *RowFields) fill() {
	if f.Text == "" {
		f.Text = DefaultTextField
	}
	if f.Prompt == "" {
		f.Prompt = DefaultPromptField
	}
	if f.Completion == "" {
		f.Completion = DefaultCompletionField
	}
	if f.Messages == "" {
		f.Messages = DefaultMessagesField
	}
}

// rowKind is a record's form.
type rowKind int

const (
	kindText rowKind = iota
	kindPromptCompletion
	kindMessages
	kindTokens
)

func (k rowKind) String() string {
	return [...]string{"{text}", "{prompt, completion}", "{messages}", "{input_ids, labels}"}[k]
}

// record is one decoded row: JSON values as encoding/json decodes them
// with UseNumber (string, json.Number, bool, nil, []any, map[string]any).
type record map[string]any

// classify tells a record's form; the first that fits wins: input_ids,
// messages, prompt and completion, text. A null field, or an empty list,
// is absent: a Parquet file has every column in every row, so a row of
// one form shows the other forms' columns empty.
func classify(rec record, f RowFields) (rowKind, error) {
	has := func(name string) bool {
		v, ok := rec[name]
		if l, isList := v.([]any); isList {
			return len(l) > 0
		}
		return ok && v != nil
	}
	switch {
	case has("input_ids"):
		return kindTokens, nil
	case has(f.Messages):
		return kindMessages, nil
	case has(f.Prompt) && has(f.Completion):
		return kindPromptCompletion, nil
	case has(f.Text):
		return kindText, nil
	}
	keys := make([]string, 0, len(rec))
	for k := range rec {
		keys = append(keys, fmt.Sprintf("%q", k))
	}
	return 0, fmt.Errorf("the row has none of the forms {%q}, {%q, %q}, {%q}, {\"input_ids\", \"labels\"} (its fields: %s); "+
		"choose the columns with --text-field, --prompt-field, --completion-field or --messages-field",
		f.Text, f.Prompt, f.Completion, f.Messages, strings.Join(keys, ", "))
}

func stringField(rec record, name string) (string, error) {
	v, ok := rec[name]
	if !ok {
		return "", fmt.Errorf("no %q field", name)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("field %q is not a string", name)
	}
	return s, nil
}

// rowBuilder turns records into rows of ids and label flags.
type rowBuilder struct {
	tok    Tokenizer // nil when every row is pre-tokenized
	fields RowFields
	chat   *chatRenderer // made on the first messages row
	format string        // --chat-format
	eos    int           // appended to completions; -1: none
	bos    []int         // put before prompts (what tokenizer(prompt) adds)
}

func newRowBuilder(tok Tokenizer, fields RowFields, chatFormat string) *rowBuilder {
	b := &rowBuilder{tok: tok, fields: fields, format: chatFormat, eos: -1}
	b.fields.fill()
	if tok != nil {
		b.eos = tok.EOT()
		if hf, ok := tok.(*HFTokenizer); ok {
			if id := hf.HF().Config().EOS.ID; id >= 0 {
				b.eos = id
			}
			b.bos = hf.HF().TemplatePrefix()
		}
	}
	return b
}

// build makes the row of a record of kind k (not kindText).
func (b *rowBuilder) build(rec record, k rowKind) ([]int32, []bool, error) {
	switch k {
	case kindTokens:
		return tokensRow(rec)
	case kindPromptCompletion:
		return b.promptRow(rec)
	case kindMessages:
		return b.messagesRow(rec)
	}
	panic("data: rowBuilder.build on a text record")
}

func (b *rowBuilder) needTokenizer(k rowKind) error {
	if b.tok == nil {
		return fmt.Errorf("%s rows need a tokenizer (--tokenizer); only {input_ids, labels} rows are prepared without one", k)
	}
	return nil
}

// promptRow is tokenizer(prompt) then the completion and EOS, as TRL's
// prompt-completion SFT: the prompt's tokens carry no label. The two are
// tokenized separately, so the mask boundary is exact.
func (b *rowBuilder) promptRow(rec record) ([]int32, []bool, error) {
	if err := b.needTokenizer(kindPromptCompletion); err != nil {
		return nil, nil, err
	}
	p, err := stringField(rec, b.fields.Prompt)
	if err != nil {
		return nil, nil, err
	}
	c, err := stringField(rec, b.fields.Completion)
	if err != nil {
		return nil, nil, err
	}
	pids := append(append([]int(nil), b.bos...), b.tok.Encode(p)...)
	cids := b.tok.Encode(c)
	if b.eos >= 0 {
		cids = append(cids, b.eos)
	}
	ids := make([]int32, 0, len(pids)+len(cids))
	labels := make([]bool, 0, cap(ids))
	for _, id := range pids {
		ids, labels = append(ids, int32(id)), append(labels, false)
	}
	for _, id := range cids {
		ids, labels = append(ids, int32(id)), append(labels, true)
	}
	return ids, labels, nil
}

// messagesRow renders the conversation, tokenizes the whole text as
// apply_chat_template(tokenize=True) does (special tokens matched, none
// added), and labels every token that overlaps an assistant span — TRL's
// rule, which maps the template's generation spans to tokens by
// character offsets.
func (b *rowBuilder) messagesRow(rec record) ([]int32, []bool, error) {
	if err := b.needTokenizer(kindMessages); err != nil {
		return nil, nil, err
	}
	if t, ok := rec["tools"]; ok && t != nil {
		if l, ok := t.([]any); !ok || len(l) > 0 {
			return nil, nil, fmt.Errorf("the row has tools, which the built-in chat formatters do not render; render it with transformers and prepare {input_ids, labels}")
		}
	}
	if b.chat == nil {
		r, err := chatRendererFor(b.tok, b.format)
		if err != nil {
			return nil, nil, err
		}
		b.chat = r
	}
	msgs, err := parseMessages(rec[b.fields.Messages], b.fields.Messages)
	if err != nil {
		return nil, nil, err
	}
	segs, err := b.chat.render(msgs)
	if err != nil {
		return nil, nil, err
	}
	return labelSegments(b.tok, segs)
}

// labelSegments tokenizes the segments' text as one string and labels
// tokens by the byte spans they decode to. A tokenizer that normalizes
// (Qwen3's NFC) decodes to the normalized text, so the spans are taken
// over the NFC form of each segment when the plain ones do not add up.
func labelSegments(tok Tokenizer, segs []chatSegment) ([]int32, []bool, error) {
	text := joinSegments(segs)
	ids := EncodeWith(tok, text, EncodeOptions{MatchSpecialTokens: true})
	ends := make([]int, len(ids))
	pos := 0
	for i, id := range ids {
		pos += len(tok.Decode([]int{id}))
		ends[i] = pos
	}
	if pos != len(text) {
		for i := range segs {
			segs[i].text = norm.NFC.String(segs[i].text)
		}
		if n := len(joinSegments(segs)); n != pos {
			return nil, nil, fmt.Errorf("the tokens decode to %d bytes but the rendered conversation has %d; cannot place the assistant spans", pos, n)
		}
	}
	// Labelled when any byte of the token lies in a labelled segment.
	var spans [][2]int
	off := 0
	for _, sg := range segs {
		if sg.label && sg.text != "" {
			spans = append(spans, [2]int{off, off + len(sg.text)})
		}
		off += len(sg.text)
	}
	labels := make([]bool, len(ids))
	start, k := 0, 0
	for i, end := range ends {
		for k < len(spans) && spans[k][1] <= start {
			k++
		}
		labels[i] = k < len(spans) && spans[k][0] < end && start < spans[k][1]
		start = end
	}
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out, labels, nil
}

func parseMessages(v any, field string) ([]chatMessage, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("field %q is not a list of messages", field)
	}
	msgs := make([]chatMessage, len(list))
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s[%d] is not an object with role and content", field, i)
		}
		role, rok := m["role"].(string)
		content, cok := m["content"].(string)
		if !rok || !cok {
			return nil, fmt.Errorf("%s[%d] needs string \"role\" and \"content\"", field, i)
		}
		if tc, ok := m["tool_calls"]; ok && tc != nil {
			if l, ok := tc.([]any); !ok || len(l) > 0 {
				return nil, fmt.Errorf("%s[%d] has tool_calls, which the built-in chat formatters do not render; render the row with transformers and prepare {input_ids, labels}", field, i)
			}
		}
		msgs[i] = chatMessage{Role: role, Content: content}
		if rc, ok := m["reasoning_content"]; ok && rc != nil {
			s, ok := rc.(string)
			if !ok {
				return nil, fmt.Errorf("%s[%d].reasoning_content is not a string", field, i)
			}
			msgs[i].ReasoningContent = &s
		}
	}
	return msgs, nil
}

// tokensRow reads {input_ids, labels}: labels, when present, must be -100
// or equal input_ids at every position (gotrain stores a mask, not
// separate label ids); without labels every token is a label.
func tokensRow(rec record) ([]int32, []bool, error) {
	ids, err := intList(rec["input_ids"], "input_ids")
	if err != nil {
		return nil, nil, err
	}
	labels := make([]bool, len(ids))
	raw, ok := rec["labels"]
	if !ok || raw == nil {
		for i := range labels {
			labels[i] = true
		}
	} else {
		lab, err := intList(raw, "labels")
		if err != nil {
			return nil, nil, err
		}
		if len(lab) != len(ids) {
			return nil, nil, fmt.Errorf("labels has %d entries but input_ids %d", len(lab), len(ids))
		}
		for i, l := range lab {
			switch {
			case l == IgnoreTarget:
			case l == ids[i]:
				labels[i] = true
			default:
				return nil, nil, fmt.Errorf("labels[%d] = %d is neither -100 nor input_ids[%d] = %d; gotrain stores a loss mask, so labels must copy input_ids where they are not -100", i, l, i, ids[i])
			}
		}
	}
	for i, id := range ids {
		if id < 0 {
			return nil, nil, fmt.Errorf("input_ids[%d] = %d is negative", i, id)
		}
	}
	return ids, labels, nil
}

func intList(v any, name string) ([]int32, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("field %q is not a list of integers", name)
	}
	out := make([]int32, len(list))
	for i, e := range list {
		var n int64
		switch x := e.(type) {
		case json.Number:
			var err error
			if n, err = x.Int64(); err != nil {
				return nil, fmt.Errorf("%s[%d] = %s is not an integer", name, i, x)
			}
		case int64:
			n = x
		case int32:
			n = int64(x)
		case float64:
			if x != math.Trunc(x) {
				return nil, fmt.Errorf("%s[%d] = %v is not an integer", name, i, x)
			}
			n = int64(x)
		default:
			return nil, fmt.Errorf("%s[%d] is not an integer", name, i)
		}
		if n < math.MinInt32 || n > math.MaxInt32 {
			return nil, fmt.Errorf("%s[%d] = %d is out of the int32 range", name, i, n)
		}
		out[i] = int32(n)
	}
	return out, nil
}
