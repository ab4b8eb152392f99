package data

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/gotrain/gotrain/internal/atomicfile"
	"github.com/gotrain/gotrain/internal/regularfile"
)

// A loss-mask companion sits beside a token shard of instruction or chat
// data and says which tokens are loss targets and where each row (one
// example: a prompt and completion, a conversation, a pre-tokenized row)
// starts. train_000000.bin's companion is train_000000.mask: the name
// keeps the shard's stem, so a glob such as 'DIR/train_*.bin' still
// matches the token shards only, and a loader finds each shard's
// companion by itself (MaskPath).
//
// Layout, all little-endian:
//
//	header   256 × int32: magic 20240917, version 1, token count (the
//	         shard's), row count R, pad id (what fills a short row's
//	         inputs), the rest 0
//	rows     (R+1) × uint32 row starts: 0, ..., token count, strictly
//	         increasing (no empty row)
//	mask     ⌈tokens/8⌉ bytes: bit i%8 (least significant first) of byte
//	         i/8 is 1 when token i is a label (its labels entry is not
//	         -100); bits past the last token are 0
//
// The file's size is fixed by the header, and is checked before anything
// is allocated from it.
const (
	maskMagic   = 20240917
	maskVersion = 1

	maskWordMagic   = 0
	maskWordVersion = 1
	maskWordTokens  = 2
	maskWordRows    = 3
	maskWordPad     = 4
)

// MaskExt is the extension of loss-mask companions.
const MaskExt = ".mask"

// IgnoreTarget is the target of a position without a label (a prompt
// token, padding): PyTorch's ignore_index. The model ignores every
// negative target.
const IgnoreTarget = -100

// MaskPath is the companion of the shard at path: its .bin extension
// replaced by .mask (another extension gets .mask appended).
func MaskPath(shard string) string {
	if s, ok := strings.CutSuffix(shard, ".bin"); ok {
		return s + MaskExt
	}
	return shard + MaskExt
}

// MaskHeader is the validated header of a companion.
type MaskHeader struct {
	NumTokens int64
	NumRows   int64
	PadID     int32
}

// FileBytes is the exact size of a companion with this header.
func (h MaskHeader) FileBytes() int64 {
	return ShardHeaderBytes + 4*(h.NumRows+1) + (h.NumTokens+7)/8
}

// maskBitsOffset is where the mask bits start.
func (h MaskHeader) maskBitsOffset() int64 { return ShardHeaderBytes + 4*(h.NumRows+1) }

func maskErr(path, format string, args ...any) error {
	return &ShardError{Path: path, Reason: "loss-mask companion: " + fmt.Sprintf(format, args...)}
}

// parseMaskHeader validates a companion's header against its file size.
func parseMaskHeader(path string, hdr []byte, size int64) (MaskHeader, error) {
	if len(hdr) < ShardHeaderBytes {
		return MaskHeader{}, maskErr(path, "truncated: %d bytes, the header alone needs %d", len(hdr), ShardHeaderBytes)
	}
	word := func(i int) int64 { return int64(int32(binary.LittleEndian.Uint32(hdr[4*i:]))) }
	if m := word(maskWordMagic); m != maskMagic {
		return MaskHeader{}, maskErr(path, "wrong magic %d (expected %d); rewrite it with 'gotrain data prepare'", m, maskMagic)
	}
	if v := word(maskWordVersion); v != maskVersion {
		return MaskHeader{}, maskErr(path, "unsupported version %d (expected %d)", v, maskVersion)
	}
	h := MaskHeader{NumTokens: word(maskWordTokens), NumRows: word(maskWordRows), PadID: int32(word(maskWordPad))}
	if h.NumTokens < 1 {
		return MaskHeader{}, maskErr(path, "token count %d must be ≥ 1", h.NumTokens)
	}
	if h.NumRows < 1 || h.NumRows > h.NumTokens {
		return MaskHeader{}, maskErr(path, "row count %d must be in [1, %d] (rows are not empty)", h.NumRows, h.NumTokens)
	}
	if h.PadID < 0 {
		return MaskHeader{}, maskErr(path, "pad id %d is negative", h.PadID)
	}
	if want := h.FileBytes(); size != want {
		return MaskHeader{}, maskErr(path, "%d bytes, but its header (%d tokens, %d rows) needs exactly %d", size, h.NumTokens, h.NumRows, want)
	}
	return h, nil
}

// parseRowStarts decodes and checks R+1 row starts.
func parseRowStarts(path string, b []byte, h MaskHeader) ([]uint32, error) {
	starts := make([]uint32, h.NumRows+1)
	for i := range starts {
		starts[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	if starts[0] != 0 || int64(starts[h.NumRows]) != h.NumTokens {
		return nil, maskErr(path, "row starts must run from 0 to the token count %d, found %d to %d", h.NumTokens, starts[0], starts[h.NumRows])
	}
	for i := 1; i < len(starts); i++ {
		if starts[i] <= starts[i-1] {
			return nil, maskErr(path, "row %d is empty or out of order (starts %d then %d)", i-1, starts[i-1], starts[i])
		}
	}
	return starts, nil
}

// MaskFile is an open companion: its header and row starts in memory, the
// mask bits read on demand. Not safe for concurrent use.
type MaskFile struct {
	path   string
	f      *os.File
	Header MaskHeader
	// Starts are the R+1 row starts (token offsets into the shard).
	Starts []uint32
	bits   []byte
}

// OpenMask opens and validates the companion at path for a shard of
// shardTokens tokens.
func OpenMask(path string, shardTokens int64) (*MaskFile, error) {
	f, st, err := regularfile.Open("loss-mask companion", path)
	if err != nil {
		return nil, err
	}
	m, err := readMaskMeta(path, f, st.Size(), shardTokens)
	if err != nil {
		f.Close()
		return nil, err
	}
	m.f = f
	return m, nil
}

func readMaskMeta(path string, r io.ReaderAt, size, shardTokens int64) (*MaskFile, error) {
	hdr := make([]byte, ShardHeaderBytes)
	n, err := r.ReadAt(hdr, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("loss-mask companion %s: %w", path, err)
	}
	h, err := parseMaskHeader(path, hdr[:n], size)
	if err != nil {
		return nil, err
	}
	if shardTokens >= 0 && h.NumTokens != shardTokens {
		return nil, maskErr(path, "holds %d tokens but its shard holds %d; the two files come from different runs of 'gotrain data prepare'", h.NumTokens, shardTokens)
	}
	b := make([]byte, 4*(h.NumRows+1))
	if _, err := r.ReadAt(b, ShardHeaderBytes); err != nil {
		return nil, fmt.Errorf("loss-mask companion %s: read row starts: %w", path, err)
	}
	starts, err := parseRowStarts(path, b, h)
	if err != nil {
		return nil, err
	}
	return &MaskFile{path: path, Header: h, Starts: starts}, nil
}

// Labels reports for tokens [pos, pos+len(dst)) whether each is a label.
func (m *MaskFile) Labels(dst []bool, pos int64) error {
	if len(dst) == 0 {
		return nil
	}
	if pos < 0 || pos+int64(len(dst)) > m.Header.NumTokens {
		panic("data: MaskFile.Labels out of range")
	}
	first, last := pos/8, (pos+int64(len(dst))-1)/8
	need := int(last - first + 1)
	if cap(m.bits) < need {
		m.bits = make([]byte, need)
	}
	b := m.bits[:need]
	if _, err := m.f.ReadAt(b, m.Header.maskBitsOffset()+first); err != nil {
		return fmt.Errorf("loss-mask companion %s: read mask at token %d: %w", m.path, pos, err)
	}
	for i := range dst {
		k := pos + int64(i) - first*8
		dst[i] = b[k/8]>>(k%8)&1 != 0
	}
	return nil
}

// Close closes the file.
func (m *MaskFile) Close() error {
	if m.f == nil {
		return nil
	}
	err := m.f.Close()
	m.f = nil
	return err
}

// ReadMask reads a whole companion (tests, tools): its header, row starts
// and one label flag per token. shardTokens < 0 skips the count check.
func ReadMask(path string, shardTokens int64) (MaskHeader, []uint32, []bool, error) {
	m, err := OpenMask(path, shardTokens)
	if err != nil {
		return MaskHeader{}, nil, nil, err
	}
	defer m.Close()
	labels := make([]bool, m.Header.NumTokens)
	if err := m.Labels(labels, 0); err != nil {
		return MaskHeader{}, nil, nil, err
	}
	return m.Header, m.Starts, labels, nil
}

// ParseMask validates a whole companion held in memory; the fuzz target's
// entry point, and the same checks OpenMask makes.
func ParseMask(name string, b []byte) (MaskHeader, []uint32, []bool, error) {
	m, err := readMaskMeta(name, bytesReaderAt(b), int64(len(b)), -1)
	if err != nil {
		return MaskHeader{}, nil, nil, err
	}
	h := m.Header
	bits := b[h.maskBitsOffset():]
	labels := make([]bool, h.NumTokens)
	for i := range labels {
		labels[i] = bits[i/8]>>(i%8)&1 != 0
	}
	if tail := h.NumTokens % 8; tail != 0 && bits[len(bits)-1]>>tail != 0 {
		return MaskHeader{}, nil, nil, maskErr(name, "mask bits past the last token are set")
	}
	return h, m.Starts, labels, nil
}

type bytesReaderAt []byte

func (b bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// maskBuilder collects one shard's rows and labels for its companion.
type maskBuilder struct {
	starts []uint32
	bits   []byte
	ntok   int64
}

// add appends a row of n tokens whose label flags are labels.
func (b *maskBuilder) add(labels []bool) {
	if len(b.starts) == 0 {
		b.starts = append(b.starts, 0)
	}
	for _, l := range labels {
		if b.ntok%8 == 0 {
			b.bits = append(b.bits, 0)
		}
		if l {
			b.bits[len(b.bits)-1] |= 1 << (b.ntok % 8)
		}
		b.ntok++
	}
	b.starts = append(b.starts, uint32(b.ntok))
}

// encode is the companion's bytes.
func (b *maskBuilder) encode(padID int32) []byte {
	rows := len(b.starts) - 1
	out := make([]byte, ShardHeaderBytes, ShardHeaderBytes+4*len(b.starts)+len(b.bits))
	put := func(i int, v uint32) { binary.LittleEndian.PutUint32(out[4*i:], v) }
	put(maskWordMagic, maskMagic)
	put(maskWordVersion, maskVersion)
	put(maskWordTokens, uint32(b.ntok))
	put(maskWordRows, uint32(rows))
	put(maskWordPad, uint32(padID))
	for _, s := range b.starts {
		out = binary.LittleEndian.AppendUint32(out, s)
	}
	return append(out, b.bits...)
}

// WriteMask writes the companion of a shard whose rows are given as label
// flags, one slice per row (their lengths sum to the shard's token
// count), atomically. padID fills short rows' inputs.
func WriteMask(path string, rows [][]bool, padID int32) error {
	var b maskBuilder
	for _, r := range rows {
		if len(r) == 0 {
			return fmt.Errorf("loss-mask companion %s: row of 0 tokens", path)
		}
		b.add(r)
	}
	if b.ntok == 0 || b.ntok > math.MaxInt32 {
		return fmt.Errorf("loss-mask companion %s: %d tokens, want 1 to %d", path, b.ntok, math.MaxInt32)
	}
	if err := atomicfile.WriteFile(path, b.encode(padID)); err != nil {
		return fmt.Errorf("loss-mask companion: %w", err)
	}
	return nil
}
