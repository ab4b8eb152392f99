package data

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// Inspecting prepared data: one row (or document) of a split as it
// trains, so a user can check what the chat template rendered and which
// tokens the loss mask keeps.

// Row is one row of instruction or chat data, or one document of a token
// stream, with the tokens that train.
type Row struct {
	// Shard is the file the row is in (a document's first token's).
	Shard string
	// Index is the row's number across the shards, from 0; Rows the
	// number of rows in them (-1 for documents, which are not counted
	// past the one read).
	Index, Rows int64
	// Masked is set for rows of a loss-masked shard; a document of a
	// token stream has no mask, and every token is a target (but the
	// first of each training sample, wherever the T+1-token windows cut
	// the stream).
	Masked bool
	Tokens []int32
	// Trained says per token whether it is a loss target: its label is
	// kept, and it is not a row's first token, which no position predicts
	// (the targets are the labels shifted by one, as in transformers'
	// causal LM loss).
	Trained []bool
}

// NumTrained is how many tokens are loss targets.
func (r Row) NumTrained() int {
	n := 0
	for _, t := range r.Trained {
		if t {
			n++
		}
	}
	return n
}

// ReadRow reads row n (from 0) of shards, in order. Shards with loss-mask
// companions (MaskPath) hold rows, which never span shards; shards without
// them are a token stream of documents, each starting with sep (the
// tokenizer's document separator, Prepare's EOT) and possibly running on
// into the next shard. sep < 0 refuses a token stream.
func ReadRow(shards []string, n int64, sep int) (Row, error) {
	if len(shards) == 0 {
		return Row{}, errors.New("inspect: no shards")
	}
	if n < 0 {
		return Row{}, fmt.Errorf("inspect: row %d: rows count from 0", n)
	}
	_, err := os.Stat(MaskPath(shards[0]))
	switch {
	case err == nil:
		return readMaskedRow(shards, n)
	case !errors.Is(err, fs.ErrNotExist):
		return Row{}, err
	case sep < 0:
		return Row{}, fmt.Errorf("inspect: %s has no loss-mask companion, so it is a token stream of documents, and without a tokenizer the document separator is unknown; name the tokenizer", shards[0])
	}
	return readDocument(shards, n, int32(sep))
}

// readMaskedRow finds row n by the companions' row counts and reads it.
func readMaskedRow(shards []string, n int64) (Row, error) {
	var total int64
	var hit *MaskFile
	var hitShard string
	var local int64
	for _, s := range shards {
		h, err := ReadShardHeader(s)
		if err != nil {
			return Row{}, err
		}
		m, err := OpenMask(MaskPath(s), h.NumTokens)
		if errors.Is(err, fs.ErrNotExist) {
			return Row{}, fmt.Errorf("inspect: %s has no loss-mask companion %s, but %s has one: the shards come from different data sets", s, MaskPath(s), MaskPath(shards[0]))
		}
		if err != nil {
			return Row{}, err
		}
		if hit == nil && n < total+m.Header.NumRows {
			hit, hitShard, local = m, s, n-total
		} else {
			m.Close()
		}
		total += m.Header.NumRows
	}
	if hit == nil {
		return Row{}, fmt.Errorf("inspect: row %d: the shards hold %d rows (0 to %d)", n, total, total-1)
	}
	defer hit.Close()
	_, toks, err := ReadShard(hitShard)
	if err != nil {
		return Row{}, err
	}
	a, b := int64(hit.Starts[local]), int64(hit.Starts[local+1])
	labels := make([]bool, b-a)
	if err := hit.Labels(labels, a); err != nil {
		return Row{}, err
	}
	labels[0] = false
	return Row{Shard: hitShard, Index: n, Rows: total, Masked: true, Tokens: toks[a:b], Trained: labels}, nil
}

// readDocument scans the token stream for document n: from the (n+1)-th
// separator to the next.
func readDocument(shards []string, n int64, sep int32) (Row, error) {
	seen := int64(-1) // documents started so far, minus one
	var doc []int32
	first := ""
	for _, s := range shards {
		_, toks, err := ReadShard(s)
		if err != nil {
			return Row{}, err
		}
		for _, t := range toks {
			if t == sep {
				if seen == n {
					return documentRow(first, n, doc), nil
				}
				seen++
				if seen == n {
					first = s
				}
			}
			if seen == n {
				doc = append(doc, t)
			}
		}
	}
	if seen == n {
		return documentRow(first, n, doc), nil
	}
	return Row{}, fmt.Errorf("inspect: document %d: the shards hold %d documents (each starts with token %d)", n, seen+1, sep)
}

func documentRow(shard string, n int64, toks []int32) Row {
	trained := make([]bool, len(toks))
	for i := range trained {
		trained[i] = true
	}
	return Row{Shard: shard, Index: n, Rows: -1, Tokens: toks, Trained: trained}
}

// Render is the row decoded, with each run of trained tokens between
// open and close. A run is decoded whole, so its text is what the
// tokenizer makes of it. Without a tokenizer it writes the ids, separated
// by spaces.
func (r Row) Render(tok Tokenizer, open, close string) string {
	var parts []string
	for i := 0; i < len(r.Tokens); {
		j := i
		for j < len(r.Tokens) && r.Trained[j] == r.Trained[i] {
			j++
		}
		var text string
		if tok != nil {
			ids := make([]int, j-i)
			for k := range ids {
				ids[k] = int(r.Tokens[i+k])
			}
			text = tok.Decode(ids)
		} else {
			ids := make([]string, j-i)
			for k := range ids {
				ids[k] = strconv.Itoa(int(r.Tokens[i+k]))
			}
			text = strings.Join(ids, " ")
		}
		if r.Trained[i] {
			text = open + text + close
		}
		parts = append(parts, text)
		i = j
	}
	sepr := ""
	if tok == nil {
		sepr = " "
	}
	return strings.Join(parts, sepr)
}
