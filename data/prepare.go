package data

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/gotrain/gotrain/data/hftok"
	"github.com/gotrain/gotrain/internal/atomicfile"
	"github.com/gotrain/gotrain/internal/regularfile"
)

// Defaults of PrepareOptions, also the CLI's.
const (
	DefaultShardTokens = 100_000_000 // fineweb's shard size
	DefaultValFraction = 0.1
	DefaultTextField   = "text"
)

// PrepareOptions configure Prepare.
type PrepareOptions struct {
	// Inputs are files, directories (walked recursively) and globs. .jsonl
	// files hold one document per line; files with a TextExtensions extension
	// are one document each.
	Inputs []string
	// TextExtensions are the extensions of one-document-per-file inputs;
	// empty means ".txt".
	TextExtensions []string
	// Tokenizer may be nil when every record is a pre-tokenized
	// {input_ids, labels} row; the shards are then uint16 when the largest
	// id allows, else uint32, and no tokenizer.json is written.
	Tokenizer Tokenizer
	OutputDir string
	// ValFraction in [0, 1) of the documents goes to val; see valSplit for
	// the rule. Zero means no val split.
	ValFraction float64
	// ShardTokens caps the tokens per shard; 0 means DefaultShardTokens.
	ShardTokens int64
	// TextField is the JSONL field holding the text; "" means "text".
	TextField string
	// PromptField, CompletionField and MessagesField name the columns of
	// the row forms (see rows.go); "" means prompt, completion, messages.
	PromptField, CompletionField, MessagesField string
	// ChatFormat forces a built-in chat formatter for messages rows
	// (chatml, qwen3, llama3); "" renders the tokenizer's chat_template
	// when gotrain knows it and refuses it otherwise.
	ChatFormat string
	// MaxRowTokens caps a row's tokens (0: no cap); Overlong says what
	// happens to a longer row: "truncate" (the default) keeps its first
	// MaxRowTokens tokens, "drop" leaves it out.
	MaxRowTokens int
	Overlong     string
	// MaxDocs stops after that many documents; 0 means all.
	MaxDocs int64
	// SkipBadLines counts and skips JSONL lines that are bad JSON or lack
	// the text field, instead of failing.
	SkipBadLines bool
	// Force replaces shards already in OutputDir instead of refusing.
	Force bool
	// Workers tokenize in parallel; 0 means GOMAXPROCS.
	Workers int
	// Progress, if not nil, receives a progress bar (meant for a terminal).
	Progress io.Writer
	// DefaultTokenizer says Tokenizer is a default, not the user's choice:
	// rows that carry their own ids then need none, so a data set of
	// {input_ids, labels} rows only is prepared as without a tokenizer
	// (its ids unchecked against the default's vocabulary, no
	// tokenizer.json: the shards' headers record the largest id, which
	// the loader checks against the model's vocabulary).
	DefaultTokenizer bool
}

// SplitSummary describes what one split received.
type SplitSummary struct {
	Documents int64
	Tokens    int64 // EOT prefixes included
	Shards    []string
}

// PrepareSummary describes a finished Prepare.
type PrepareSummary struct {
	Train, Val        SplitSummary
	Tokenizer         TokenizerInfo
	InputFiles        int   // files read (MaxDocs may stop before all)
	InputBytes        int64 // bytes of the documents read
	SkippedLines      int64 // bad JSONL lines skipped with SkipBadLines
	SkippedEmptyFiles int   // empty files met while walking directories or globs
	Elapsed           time.Duration

	// Format is the shards' format: uint16 tokens, or uint32 for
	// vocabularies beyond 65,535 ids.
	Format ShardFormat

	// Rows is set when the records were rows (prompt/completion,
	// messages, input_ids): the shards have loss-mask companions.
	Rows RowSummary
}

// RowSummary describes the rows of a row-shaped data set.
type RowSummary struct {
	Kinds     map[string]int64 // rows per form, e.g. "{messages}"
	Rows      int64            // rows written, both splits
	Truncated int64            // rows cut to MaxRowTokens
	Dropped   int64            // rows longer than MaxRowTokens left out
	Labels    int64            // tokens that are loss targets' labels
	// Lengths counts rows by token length (before truncation): bucket i
	// holds lengths in (2^(i-1), 2^i], bucket 0 length 1.
	Lengths [32]int64
	Longest int64
}

func (s *RowSummary) addLength(n int) {
	b := 0
	for (1 << b) < n {
		b++
	}
	s.Lengths[min(b, len(s.Lengths)-1)]++
	s.Longest = max(s.Longest, int64(n))
}

// TokensPerSecond is the overall tokenization rate.
func (s PrepareSummary) TokensPerSecond() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Train.Tokens+s.Val.Tokens) / s.Elapsed.Seconds()
}

// Prepare tokenizes documents into OutputDir/train_%06d.bin, val_%06d.bin and
// tokenizer.json (gotrain's record, or a copy of a Hugging Face tokenizer's
// files). Shards hold uint16 tokens, or uint32 when the vocabulary exceeds
// 65,535 ids (ShardFormatFor). Documents are read in sorted path order
// (lines in file order), each is prefixed with EOT as llm.c's fineweb shards
// are, and documents may span shard boundaries. Tokenization runs on Workers
// goroutines over chunks of documents; shards are written in document order,
// so the output does not depend on Workers. On error, the shards this call
// published are removed.
func Prepare(ctx context.Context, opts PrepareOptions) (PrepareSummary, error) {
	start := time.Now()
	var sum PrepareSummary
	if err := checkPrepareOptions(&opts); err != nil {
		return sum, err
	}
	// Pre-tokenized rows without a tokenizer are written as uint32 and
	// narrowed at the end when the largest id allows.
	format := ShardLlama3
	if opts.Tokenizer != nil {
		format = ShardFormatFor(opts.Tokenizer.VocabSize())
		if eot := int64(opts.Tokenizer.EOT()); eot < 0 || eot > format.MaxToken() {
			return sum, fmt.Errorf("prepare: tokenizer %s has EOT %d, which does not fit %s shards (ids must be in [0, %d])",
				opts.Tokenizer.Name(), eot, format, format.MaxToken())
		}
		if err := checkTokenizerTarget(opts.OutputDir, opts.Tokenizer); err != nil {
			return sum, err
		}
	}
	inputs, err := resolveInputs(opts.Inputs, opts.TextExtensions)
	if err != nil {
		return sum, fmt.Errorf("prepare: %w", err)
	}
	sum.SkippedEmptyFiles = inputs.skippedEmpty
	old, err := prepareOutputDir(opts.OutputDir, opts.Force)
	if err != nil {
		return sum, err
	}

	pad := padID(opts.Tokenizer)
	train := &splitWriter{dir: opts.OutputDir, prefix: "train", shardTokens: opts.ShardTokens, format: format, pad: pad}
	val := &splitWriter{dir: opts.OutputDir, prefix: "val", shardTokens: opts.ShardTokens, format: format, pad: pad}
	var bar *progressbar.ProgressBar
	if opts.Progress != nil {
		bar = progressbar.NewOptions64(inputs.bytes,
			progressbar.OptionSetWriter(opts.Progress),
			progressbar.OptionSetDescription("tokenizing"),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish())
	}
	p := &pipeline{opts: opts, inputs: inputs, train: train, val: val, bar: bar, format: format,
		rows: newRowBuilder(opts.Tokenizer, RowFields{Text: opts.TextField, Prompt: opts.PromptField,
			Completion: opts.CompletionField, Messages: opts.MessagesField}, opts.ChatFormat)}
	p.sum.Kinds = map[string]int64{}
	err = p.run(ctx)
	if err == nil {
		format, err = p.finish(format)
	}
	if bar != nil {
		_ = bar.Finish()
	}
	if err != nil {
		train.abort()
		val.abort()
		if errors.Is(err, context.Canceled) {
			err = fmt.Errorf("prepare: interrupted: %w", err)
		}
		return sum, err
	}
	// With Force, old shards that this run did not overwrite would otherwise
	// be read as part of the new data set.
	for _, path := range old {
		if !train.published(path) && !val.published(path) {
			if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				return sum, fmt.Errorf("prepare: remove old shard: %w", rerr)
			}
		}
	}
	p.summarize(&sum, format)
	sum.Elapsed = time.Since(start)
	return sum, nil
}

// summarize fills in what a finished prepare wrote: the splits, the
// tokenizer (or none, with the ids the rows hold), the format and rows.
func (p *pipeline) summarize(sum *PrepareSummary, format ShardFormat) {
	train, val := p.train, p.val
	sum.Train = train.summary()
	sum.Val = val.summary()
	if p.tokenizerRecorded() {
		sum.Tokenizer = InfoOf(p.opts.Tokenizer)
	} else {
		sum.Tokenizer = TokenizerInfo{Tokenizer: "none (pre-tokenized input_ids)", VocabSize: int(max(train.maxID, val.maxID) + 1), EOT: -1}
	}
	sum.Format = format
	if p.rowMode == 1 {
		sum.Rows = p.sum
	}
	sum.InputBytes = p.readBytes
	sum.InputFiles = p.filesRead
	sum.SkippedLines = p.skippedLines
}

// ShardFormatFor is the shard format for a vocabulary of vocab ids: llm.c's
// uint16 shards while the vocabulary has at most 65,535 ids, its Llama 3
// variant with uint32 tokens beyond (Qwen3's 151,669, Llama 3's 128,256).
func ShardFormatFor(vocab int) ShardFormat {
	if vocab > math.MaxUint16 {
		return ShardLlama3
	}
	return ShardGPT2
}

// checkTokenizerTarget refuses to write shards into a model directory whose
// Hugging Face tokenizer.json the tokenizer record would replace (Prepare
// writes tokenizer.json beside the shards): a model snapshot has its
// config.json or weights there, and its tokenizer must survive.
func checkTokenizerTarget(dir string, tok Tokenizer) error {
	model, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil && len(model) == 0 {
		return nil // no model there
	}
	path := filepath.Join(dir, TokenizerInfoFile)
	b, err := regularfile.Read("tokenizer info", path, hftok.MaxFileBytes)
	if err != nil || !isHFTokenizerJSON(b) {
		return nil // absent (or unreadable, which writing it will report)
	}
	if hf, ok := tok.(*HFTokenizer); ok && string(hf.files[0].data) == string(b) {
		return nil
	}
	return fmt.Errorf("prepare: %s holds a model and its Hugging Face tokenizer.json, which preparing data there with tokenizer %s would replace; "+
		"write the shards into a directory of their own (--output)", dir, tok.Name())
}

func checkPrepareOptions(o *PrepareOptions) error {
	switch o.Overlong {
	case "":
		o.Overlong = "truncate"
	case "truncate", "drop":
	default:
		return fmt.Errorf("prepare: --overlong %q: want truncate or drop", o.Overlong)
	}
	if o.MaxRowTokens < 0 {
		return fmt.Errorf("prepare: --max-row-tokens %d must be ≥ 0 (0: no cap)", o.MaxRowTokens)
	}
	if o.OutputDir == "" {
		return fmt.Errorf("prepare: no output directory given")
	}
	if math.IsNaN(o.ValFraction) || o.ValFraction < 0 || o.ValFraction >= 1 {
		return fmt.Errorf("prepare: val fraction %v must be in [0, 1)", o.ValFraction)
	}
	if o.ShardTokens == 0 {
		o.ShardTokens = DefaultShardTokens
	}
	if o.ShardTokens < 1 || o.ShardTokens > math.MaxInt32 {
		return fmt.Errorf("prepare: shard tokens %d must be in [1, %d] (the header count is an int32)", o.ShardTokens, math.MaxInt32)
	}
	if o.TextField == "" {
		o.TextField = DefaultTextField
	}
	if o.MaxDocs < 0 {
		return fmt.Errorf("prepare: max docs %d must be ≥ 0 (0 means all)", o.MaxDocs)
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	return nil
}

// prepareOutputDir creates dir and returns the shards already in it, refusing
// to go on if there are some and force is off.
func prepareOutputDir(dir string, force bool) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("prepare: output directory: %w", err)
	}
	var old []string
	for _, pat := range []string{"train_*.bin", "val_*.bin", "train_*" + MaskExt, "val_*" + MaskExt} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return nil, fmt.Errorf("prepare: output directory %s: %w", dir, err)
		}
		old = append(old, m...)
	}
	if len(old) > 0 && !force {
		return nil, fmt.Errorf("prepare: output directory %s already holds %d shards (%s, ...); use Force (--force) to replace them",
			dir, len(old), filepath.Base(old[0]))
	}
	if force {
		// Temporary shards of a killed run (see CreateShard's naming).
		for _, pat := range []string{".train_*.bin.tmp*", ".val_*.bin.tmp*", ".train_*.mask.tmp*", ".val_*.mask.tmp*"} {
			m, _ := filepath.Glob(filepath.Join(dir, pat))
			for _, path := range m {
				os.Remove(path)
			}
		}
	}
	return old, nil
}

// splitWriter cuts one split's token stream into shards of at most
// shardTokens tokens. Rows (addRow) never span shards: a row that does not
// fit the current shard starts the next, and each shard gets a loss-mask
// companion.
type splitWriter struct {
	dir, prefix string
	shardTokens int64
	format      ShardFormat
	pad         int32
	cur         *ShardWriter
	mask        *maskBuilder // the current shard's rows, in row mode
	shards      []string
	masks       []string
	docs        int64
	tokens      int64
	maxID       int64
}

func (s *splitWriter) open() error {
	path := filepath.Join(s.dir, fmt.Sprintf("%s_%06d.bin", s.prefix, len(s.shards)))
	w, err := CreateShard(path, s.format)
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	s.cur = w
	return nil
}

func (s *splitWriter) add(tokens []int32) error {
	s.docs++
	for len(tokens) > 0 {
		if s.cur == nil {
			if err := s.open(); err != nil {
				return err
			}
		}
		n := min(int64(len(tokens)), s.shardTokens-s.cur.Len())
		if err := s.write(tokens[:n]); err != nil {
			return err
		}
		tokens = tokens[n:]
		if s.cur.Len() == s.shardTokens {
			if err := s.closeShard(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *splitWriter) write(tokens []int32) error {
	if err := s.cur.Write(tokens); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	for _, t := range tokens {
		s.maxID = max(s.maxID, int64(t))
	}
	s.tokens += int64(len(tokens))
	return nil
}

// addRow writes one row whole, with its label flags.
func (s *splitWriter) addRow(ids []int32, labels []bool) error {
	s.docs++
	if s.cur != nil && s.cur.Len() > 0 && s.cur.Len()+int64(len(ids)) > s.shardTokens {
		if err := s.closeShard(); err != nil {
			return err
		}
	}
	if s.cur == nil {
		if err := s.open(); err != nil {
			return err
		}
		s.mask = &maskBuilder{}
	}
	if err := s.write(ids); err != nil {
		return err
	}
	s.mask.add(labels)
	if s.cur.Len() >= s.shardTokens {
		return s.closeShard()
	}
	return nil
}

func (s *splitWriter) closeShard() error {
	w, m := s.cur, s.mask
	s.cur, s.mask = nil, nil
	if err := w.Close(); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	s.shards = append(s.shards, w.Path())
	if m != nil {
		path := MaskPath(w.Path())
		if err := atomicfile.WriteFile(path, m.encode(s.pad)); err != nil {
			return fmt.Errorf("prepare: loss-mask companion: %w", err)
		}
		s.masks = append(s.masks, path)
	}
	return nil
}

func (s *splitWriter) finish() error {
	if s.cur == nil {
		return nil
	}
	return s.closeShard()
}

func (s *splitWriter) abort() {
	if s.cur != nil {
		s.cur.Abort()
		s.cur = nil
	}
	for _, p := range append(s.shards, s.masks...) {
		os.Remove(p)
	}
	s.shards, s.masks = nil, nil
}

func (s *splitWriter) published(path string) bool {
	return slices.Contains(s.shards, path) || slices.Contains(s.masks, path)
}

func (s *splitWriter) summary() SplitSummary {
	return SplitSummary{Documents: s.docs, Tokens: s.tokens, Shards: append([]string(nil), s.shards...)}
}

// narrowShards rewrites the uint32 shards of pre-tokenized rows as uint16
// when every id fits, which is what a tokenizer of that size would have
// given; it returns the format the shards end in.
func narrowShards(splits ...*splitWriter) (ShardFormat, error) {
	var maxID int64
	for _, s := range splits {
		maxID = max(maxID, s.maxID)
	}
	if maxID > math.MaxUint16 {
		return ShardLlama3, nil
	}
	for _, s := range splits {
		for _, path := range s.shards {
			_, toks, err := ReadShard(path)
			if err != nil {
				return 0, fmt.Errorf("prepare: %w", err)
			}
			if err := WriteShard(path, ShardGPT2, toks); err != nil {
				return 0, fmt.Errorf("prepare: %w", err)
			}
		}
	}
	return ShardGPT2, nil
}

// checkRowIDs refuses {input_ids, labels} rows whose ids lie beyond the
// default tokenizer that other rows of the data set needed: the ids were
// made by another tokenizer, which must then be named.
func checkRowIDs(tok Tokenizer, splits ...*splitWriter) error {
	for _, s := range splits {
		if s.maxID >= int64(tok.VocabSize()) {
			return fmt.Errorf("prepare: the {input_ids, labels} rows hold id %d, beyond the %d ids of tokenizer %s that the other rows were tokenized with; "+
				"pass --tokenizer with the tokenizer that made the ids", s.maxID, tok.VocabSize(), tok.Name())
		}
	}
	return nil
}

// removeStaleTokenizerRecord removes gotrain's own tokenizer record from
// dir, left by an earlier prepare there, when the shards written now have
// no tokenizer: it would describe them wrongly. A Hugging Face
// tokenizer.json (a model's) is never touched.
func removeStaleTokenizerRecord(dir string) error {
	path := filepath.Join(dir, TokenizerInfoFile)
	b, err := regularfile.Read("tokenizer info", path, maxTokenizerInfoBytes)
	if err != nil || isHFTokenizerJSON(b) {
		return nil // absent, unreadable (not ours to judge) or a model's
	}
	if _, err := ParseTokenizerInfo(path, b); err != nil {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("prepare: remove the earlier tokenizer record %s, which does not describe these pre-tokenized rows: %w", path, err)
	}
	return nil
}

// padID is what fills a short row's inputs: the tokenizer's pad token,
// else its EOS, else its EOT; 0 without a tokenizer. Padded inputs come
// after the row's last target, so with causal attention their value
// changes no loss.
func padID(tok Tokenizer) int32 {
	if tok == nil {
		return 0
	}
	if hf, ok := tok.(*HFTokenizer); ok {
		c := hf.HF().Config()
		if c.PAD.ID >= 0 {
			return int32(c.PAD.ID)
		}
		if c.EOS.ID >= 0 {
			return int32(c.EOS.ID)
		}
	}
	return int32(tok.EOT())
}

// pipeline reads documents on one goroutine, tokenizes chunks of them on
// Workers goroutines, and writes results on the caller's goroutine in the
// order the chunks were read.
type pipeline struct {
	opts       PrepareOptions
	inputs     inputSet
	train, val *splitWriter
	bar        *progressbar.ProgressBar
	format     ShardFormat

	readBytes    int64
	skippedLines int64
	filesRead    int

	rows    *rowBuilder
	rowMode int // 0: not known yet, 1: rows, -1: token stream
	sum     RowSummary

	// With a default tokenizer (PrepareOptions.DefaultTokenizer), idsFirst
	// says the first record was an {input_ids, labels} row, so the shards
	// are written as without a tokenizer, and tokenized that a later row
	// needed the tokenizer after all.
	idsFirst, tokenized bool
}

// finish closes both splits' last shards, narrows the shards of rows
// written without a tokenizer to the width their ids need, and writes the
// tokenizer record, or removes a stale one when none is recorded. It
// returns the shards' format.
func (p *pipeline) finish(format ShardFormat) (ShardFormat, error) {
	tok, recorded := p.opts.Tokenizer, p.tokenizerRecorded()
	if recorded && p.idsFirst {
		if err := checkRowIDs(tok, p.train, p.val); err != nil {
			return format, err
		}
	}
	if err := p.train.finish(); err != nil {
		return format, err
	}
	if err := p.val.finish(); err != nil {
		return format, err
	}
	// After finish: the last shard of each split is closed only there.
	if tok == nil || p.idsFirst {
		var err error
		if format, err = narrowShards(p.train, p.val); err != nil {
			return format, err
		}
	}
	if p.train.docs+p.val.docs == 0 {
		return format, fmt.Errorf("prepare: the inputs hold no documents")
	}
	if recorded {
		return format, WriteTokenizerInfo(p.opts.OutputDir, tok)
	}
	return format, removeStaleTokenizerRecord(p.opts.OutputDir)
}

// tokenizerRecorded reports whether the data set's tokenizer is recorded
// beside the shards (and its vocabulary sizes the shards): a tokenizer
// the user chose, or a default one that some record needed.
func (p *pipeline) tokenizerRecorded() bool {
	return p.opts.Tokenizer != nil && (!p.idsFirst || p.tokenized)
}

type document struct {
	source string // path, or path:line for JSONL
	text   string
	rec    record // a record of a JSON or Parquet file; nil for a text file
	val    bool
}

type chunk struct {
	docs   []document
	bytes  int64 // input bytes the chunk covers, for the progress bar
	result chan chunkResult
}

type chunkResult struct {
	tokens [][]int32 // per document: a text document EOT first, a row as built
	labels [][]bool  // per document: nil for text, a row's label flags
	kinds  []rowKind
	err    error
}

// A chunk closes at this many documents or text bytes: big enough to keep
// workers busy between hand-offs, small enough to bound memory in flight.
const (
	chunkMaxDocs  = 256
	chunkMaxBytes = 1 << 20
)

func (p *pipeline) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan *chunk, p.opts.Workers)
	order := make(chan *chunk, 2*p.opts.Workers)
	var readErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(jobs)
		defer close(order)
		readErr = p.produce(ctx, jobs, order)
	}()
	for range p.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range jobs {
				c.result <- p.tokenize(ctx, c.docs)
			}
		}()
	}
	err := p.consume(order)
	if err != nil {
		cancel()
	}
	// Drain so the reader is never blocked on a full order channel.
	for range order {
	}
	wg.Wait()
	if err != nil {
		return err
	}
	if readErr != nil && !errors.Is(readErr, context.Canceled) {
		return readErr
	}
	return ctx.Err()
}

func (p *pipeline) consume(order <-chan *chunk) error {
	for c := range order {
		res := <-c.result
		if res.err != nil {
			return res.err
		}
		for i, toks := range res.tokens {
			w := p.train
			if c.docs[i].val {
				w = p.val
			}
			if err := p.write(w, c.docs[i].source, res.kinds[i], toks, res.labels[i]); err != nil {
				return err
			}
		}
		p.readBytes += c.bytes
		if p.bar != nil {
			_ = p.bar.Add64(c.bytes)
		}
	}
	return nil
}

// write hands one document or row to its split: text documents to the
// token stream, rows whole with their labels, after MaxRowTokens. A data
// set is one or the other; the first record decides.
func (p *pipeline) write(w *splitWriter, source string, k rowKind, toks []int32, labels []bool) error {
	mode := -1
	if k != kindText {
		mode = 1
	}
	if p.rowMode == 0 {
		p.rowMode = mode
		if p.opts.DefaultTokenizer && k == kindTokens {
			// Written as without a tokenizer; the first shard opens after.
			p.idsFirst = true
			for _, sw := range []*splitWriter{p.train, p.val} {
				sw.format, sw.pad = ShardLlama3, padID(nil)
			}
		}
	}
	if k != kindTokens {
		p.tokenized = true
	}
	if mode != p.rowMode {
		return fmt.Errorf("prepare: %s: a %s record among %s; a data set is either text documents (a token stream) or rows with loss masks, not both",
			source, k, map[int]string{1: "rows", -1: "text documents"}[p.rowMode])
	}
	if mode < 0 {
		return w.add(toks)
	}
	p.sum.Kinds[k.String()]++
	p.sum.addLength(len(toks))
	if n := p.opts.MaxRowTokens; n > 0 && len(toks) > n {
		if p.opts.Overlong == "drop" {
			p.sum.Dropped++
			return nil
		}
		p.sum.Truncated++
		toks, labels = toks[:n], labels[:n]
	}
	p.sum.Rows++
	for _, l := range labels {
		if l {
			p.sum.Labels++
		}
	}
	return w.addRow(toks, labels)
}

func (p *pipeline) tokenize(ctx context.Context, docs []document) chunkResult {
	out := make([][]int32, len(docs))
	labels := make([][]bool, len(docs))
	kinds := make([]rowKind, len(docs))
	maxTok := p.format.MaxToken()
	rb := *p.rows // a copy per chunk: the chat renderer is made lazily
	for i, d := range docs {
		// After a failure or an interrupt, queued work is dropped quickly.
		if err := ctx.Err(); err != nil {
			return chunkResult{err: err}
		}
		text := d.text
		if d.rec != nil {
			k, err := classify(d.rec, rb.fields)
			if err != nil {
				return chunkResult{err: fmt.Errorf("prepare: %s: %w", d.source, err)}
			}
			kinds[i] = k
			if k == kindText {
				if text, err = stringField(d.rec, rb.fields.Text); err != nil {
					return chunkResult{err: fmt.Errorf("prepare: %s: %w", d.source, err)}
				}
			} else {
				ids, lab, err := rb.build(d.rec, k)
				if err != nil {
					return chunkResult{err: fmt.Errorf("prepare: %s: %w", d.source, err)}
				}
				if len(ids) == 0 {
					return chunkResult{err: fmt.Errorf("prepare: %s: the row has no tokens", d.source)}
				}
				vocab := maxTok
				switch {
				case k == kindTokens && p.opts.DefaultTokenizer:
					// Ids not made by the default tokenizer: the data's own
					// largest id decides the shards' width.
					vocab = ShardLlama3.MaxToken()
				case p.opts.Tokenizer != nil:
					vocab = min(vocab, int64(p.opts.Tokenizer.VocabSize()-1))
				}
				for j, id := range ids {
					if int64(id) > vocab {
						return chunkResult{err: fmt.Errorf("prepare: %s: token id %d at position %d is beyond the tokenizer's vocabulary (ids must be in [0, %d])",
							d.source, id, j, vocab)}
					}
				}
				out[i], labels[i] = ids, lab
				continue
			}
		}
		if p.opts.Tokenizer == nil {
			return chunkResult{err: fmt.Errorf("prepare: %s: text needs a tokenizer (--tokenizer); only {input_ids, labels} rows are prepared without one", d.source)}
		}
		eot := int32(p.opts.Tokenizer.EOT())
		ids := p.opts.Tokenizer.Encode(text)
		toks := make([]int32, len(ids)+1)
		toks[0] = eot
		for j, id := range ids {
			if id < 0 || int64(id) > maxTok {
				return chunkResult{err: fmt.Errorf("prepare: %s: token id %d does not fit %s shards (ids must be in [0, %d])",
					d.source, id, p.format, maxTok)}
			}
			toks[j+1] = int32(id)
		}
		out[i] = toks
	}
	return chunkResult{tokens: out, labels: labels, kinds: kinds}
}

// produce reads documents in order, assigns each to train or val, and hands
// chunks to the workers and, in the same order, to the writer.
func (p *pipeline) produce(ctx context.Context, jobs, order chan<- *chunk) error {
	split := newValSplit(p.opts.ValFraction)
	var next int64 // index of the next document
	cur := &chunk{}
	var curText int
	send := func() error {
		if len(cur.docs) == 0 && cur.bytes == 0 {
			return nil
		}
		cur.result = make(chan chunkResult, 1)
		select {
		case order <- cur:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case jobs <- cur:
		case <-ctx.Done():
			// The writer waits on this chunk's result; answer it.
			cur.result <- chunkResult{err: ctx.Err()}
			return ctx.Err()
		}
		cur, curText = &chunk{}, 0
		return nil
	}
	errStop := errors.New("max docs reached")
	emit := func(d document, n int64) error {
		if p.opts.MaxDocs > 0 && next >= p.opts.MaxDocs {
			return errStop
		}
		d.val = split.isVal(next)
		cur.docs = append(cur.docs, d)
		cur.bytes += n
		curText += max(len(d.text), int(n))
		next++
		if len(cur.docs) >= chunkMaxDocs || curText >= chunkMaxBytes {
			return send()
		}
		return nil
	}
	for _, f := range p.inputs.files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p.opts.MaxDocs > 0 && next >= p.opts.MaxDocs {
			break
		}
		p.filesRead++
		err := p.readFile(f, emit)
		if errors.Is(err, errStop) {
			break
		}
		if err != nil {
			return err
		}
	}
	return send()
}

func (p *pipeline) readFile(f inputFile, emit func(d document, n int64) error) error {
	// Opened without blocking: the file was a regular one when the inputs
	// were listed, but a FIFO put in its place since must not hang the run.
	fh, _, err := regularfile.Open("input", f.path)
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	defer fh.Close()
	if f.kind == inputText {
		b, err := io.ReadAll(fh)
		if err != nil {
			return fmt.Errorf("prepare: read input %s: %w", f.path, err)
		}
		return emit(document{source: f.path, text: string(b)}, int64(len(b)))
	}
	rr := &recordReader{name: f.path, skipBad: p.opts.SkipBadLines}
	sep := ":"
	if f.kind == inputParquet {
		sep = ":row "
	}
	fields := p.rows.fields
	err = rr.read(fh, f.size, f.kind, func(pos int, rec record, n int64) error {
		source := fmt.Sprintf("%s%s%d", f.path, sep, pos)
		// A record of no known form is a bad line, which SkipBadLines
		// counts and skips.
		k, err := classify(rec, fields)
		if err == nil && k == kindText {
			_, err = stringField(rec, fields.Text)
		}
		if err != nil {
			if !p.opts.SkipBadLines {
				return fmt.Errorf("prepare: %s: %w", source, err)
			}
			rr.skipped++
			return nil
		}
		return emit(document{source: source, rec: rec}, n)
	})
	// Written by the reader goroutine; read by Prepare after run's Wait.
	p.skippedLines += rr.skipped
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	return nil
}
