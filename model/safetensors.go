package model

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/internal/atomicfile"
	"github.com/gotrain/gotrain/internal/regularfile"
)

// The safetensors format: an 8-byte little-endian header length, a JSON
// object {name: {"dtype", "shape", "data_offsets": [begin, end]}} with an
// optional "__metadata__" string map, then the raw little-endian data;
// offsets count from the first byte after the header.

// maxSafetensorsHeader bounds the JSON header as the format's reference
// implementation does, so a corrupt length cannot ask for gigabytes.
const maxSafetensorsHeader = 100_000_000

// TensorHeader is one tensor's entry in a safetensors header.
type TensorHeader struct {
	Name       string
	DType      string // as written in the file: "F32", "BF16", "F16", "I32", "I64", …
	Shape      []int
	Begin, End int64 // byte range within the data section
}

// NumElements is the product of Shape (1 for a scalar).
func (h TensorHeader) NumElements() int {
	n := 1
	for _, d := range h.Shape {
		n *= d
	}
	return n
}

// stDTypeSize is the element size of every dtype the format defines; ok is
// false for a name it does not define.
func stDTypeSize(name string) (size int, ok bool) {
	switch name {
	case "BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3":
		return 1, true
	case "I16", "U16", "F16", "BF16":
		return 2, true
	case "I32", "U32", "F32":
		return 4, true
	case "I64", "U64", "F64":
		return 8, true
	}
	return 0, false
}

// STDType is the safetensors name of a backend dtype.
func STDType(dt backend.DType) string {
	switch dt {
	case backend.F32:
		return "F32"
	case backend.BF16:
		return "BF16"
	case backend.F16:
		return "F16"
	case backend.I32:
		return "I32"
	case backend.U16:
		return "U16"
	}
	panic("model: dtype has no safetensors name")
}

// ParseSafetensorsHeader validates a header's JSON against a data section of
// dataLen bytes: known dtypes, non-negative shapes, offsets inside the data,
// sizes equal to prod(shape)·dtype size, no two tensors overlapping, no name
// twice. Tensors come back sorted by Begin.
func ParseSafetensorsHeader(header []byte, dataLen int64) ([]TensorHeader, map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(header))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, fmt.Errorf("header is not JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, errors.New("header is not a JSON object")
	}
	var tensors []TensorHeader
	var meta map[string]string
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("header: %w", err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, nil, errors.New("header: key is not a string")
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("tensor %q: listed twice", name)
		}
		seen[name] = true
		if name == "__metadata__" {
			if err := dec.Decode(&meta); err != nil {
				return nil, nil, fmt.Errorf("__metadata__: want a map of strings: %w", err)
			}
			continue
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				return nil, nil, fmt.Errorf("tensor %q: the header JSON ends early", name)
			}
			return nil, nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		if len(raw) == 0 || raw[0] != '{' {
			return nil, nil, fmt.Errorf("tensor %q: entry is not a JSON object", name)
		}
		var e struct {
			DType       *string  `json:"dtype"`
			Shape       *[]int64 `json:"shape"`
			DataOffsets *[]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return nil, nil, fmt.Errorf("tensor %q: %q holds a JSON %s, want integers (or a dtype string)", name, te.Field, te.Value)
			}
			return nil, nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		t, err := checkEntry(name, e.DType, e.Shape, e.DataOffsets, dataLen)
		if err != nil {
			return nil, nil, err
		}
		tensors = append(tensors, t)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, nil, fmt.Errorf("header: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("header: trailing data after the JSON object")
	}
	sort.SliceStable(tensors, func(i, j int) bool {
		if tensors[i].Begin != tensors[j].Begin {
			return tensors[i].Begin < tensors[j].Begin
		}
		return tensors[i].End < tensors[j].End
	})
	for i := 1; i < len(tensors); i++ {
		if p, c := tensors[i-1], tensors[i]; p.End > c.Begin {
			return nil, nil, fmt.Errorf("tensor %q: bytes [%d, %d) overlap tensor %q [%d, %d)", c.Name, c.Begin, c.End, p.Name, p.Begin, p.End)
		}
	}
	return tensors, meta, nil
}

func checkEntry(name string, dtype *string, shape, offsets *[]int64, dataLen int64) (TensorHeader, error) {
	fail := func(format string, a ...any) (TensorHeader, error) {
		return TensorHeader{}, fmt.Errorf("tensor %q: %s", name, fmt.Sprintf(format, a...))
	}
	if dtype == nil || shape == nil || offsets == nil {
		return fail(`entry needs "dtype", "shape" and "data_offsets"`)
	}
	size, ok := stDTypeSize(*dtype)
	if !ok {
		return fail("unknown dtype %q", *dtype)
	}
	// Count bytes with an overflow check: every factor is bounded by dataLen.
	bytesWant := int64(size)
	dims := make([]int, len(*shape))
	for i, d := range *shape {
		if d < 0 {
			return fail("negative dimension %d in shape %v", d, *shape)
		}
		if d > 0 && bytesWant > math.MaxInt64/d {
			return fail("shape %v is too large", *shape)
		}
		bytesWant *= d
		dims[i] = int(d)
	}
	if len(*offsets) != 2 {
		return fail("data_offsets has %d entries, want [begin, end]", len(*offsets))
	}
	b, e := (*offsets)[0], (*offsets)[1]
	if b < 0 || e < b || e > dataLen {
		return fail("data_offsets [%d, %d] outside the %d-byte data section", b, e, dataLen)
	}
	if e-b != bytesWant {
		return fail("data_offsets [%d, %d] hold %d bytes, but %s%v needs %d", b, e, e-b, *dtype, *shape, bytesWant)
	}
	return TensorHeader{Name: name, DType: *dtype, Shape: dims, Begin: b, End: e}, nil
}

// SafetensorsFile reads tensors from a safetensors file on demand. It is not
// safe for concurrent use; Close releases the file.
type SafetensorsFile struct {
	path      string
	f         *os.File
	dataStart int64
	tensors   []TensorHeader
	index     map[string]int
	meta      map[string]string
}

// OpenSafetensors opens and validates path's header.
func OpenSafetensors(path string) (*SafetensorsFile, error) {
	f, st, err := regularfile.Open("safetensors", path)
	if err != nil {
		return nil, err
	}
	s, err := parseSafetensors(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("safetensors %s: %w", path, err)
	}
	s.path, s.f = path, f
	return s, nil
}

// parseSafetensors reads and validates the header of a size-byte file.
func parseSafetensors(r io.ReaderAt, size int64) (*SafetensorsFile, error) {
	var lenBuf [8]byte
	if size < 8 {
		return nil, fmt.Errorf("file is %d bytes, shorter than the 8-byte header length", size)
	}
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("read header length: %w", err)
	}
	hlen := binary.LittleEndian.Uint64(lenBuf[:])
	if hlen > maxSafetensorsHeader || hlen > uint64(size-8) {
		return nil, fmt.Errorf("header length %d does not fit the %d-byte file (limit %d)", hlen, size, maxSafetensorsHeader)
	}
	header := make([]byte, hlen)
	if _, err := r.ReadAt(header, 8); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	dataStart := 8 + int64(hlen)
	tensors, meta, err := ParseSafetensorsHeader(header, size-dataStart)
	if err != nil {
		return nil, err
	}
	s := &SafetensorsFile{dataStart: dataStart, tensors: tensors, meta: meta, index: map[string]int{}}
	for i, t := range tensors {
		s.index[t.Name] = i
	}
	return s, nil
}

// Path is the file's name.
func (s *SafetensorsFile) Path() string { return s.path }

// Tensors lists the header's tensors by position in the data section.
func (s *SafetensorsFile) Tensors() []TensorHeader { return s.tensors }

// Metadata is the "__metadata__" map (nil when absent).
func (s *SafetensorsFile) Metadata() map[string]string { return s.meta }

// Header finds a tensor's entry.
func (s *SafetensorsFile) Header(name string) (TensorHeader, bool) {
	i, ok := s.index[name]
	if !ok {
		return TensorHeader{}, false
	}
	return s.tensors[i], true
}

// Close releases the file.
func (s *SafetensorsFile) Close() error { return s.f.Close() }

// Raw returns a tensor's bytes as stored.
func (s *SafetensorsFile) Raw(name string) (TensorHeader, []byte, error) {
	h, ok := s.Header(name)
	if !ok {
		return h, nil, fmt.Errorf("safetensors %s: no tensor %q", s.path, name)
	}
	buf := make([]byte, h.End-h.Begin)
	if _, err := s.f.ReadAt(buf, s.dataStart+h.Begin); err != nil {
		return h, nil, fmt.Errorf("safetensors %s: tensor %q: %w", s.path, name, err)
	}
	return h, buf, nil
}

// ReadFloat32 returns a F32, BF16 or F16 tensor widened to float32.
func (s *SafetensorsFile) ReadFloat32(name string) ([]float32, TensorHeader, error) {
	h, ok := s.Header(name)
	if !ok {
		return nil, h, fmt.Errorf("safetensors %s: no tensor %q", s.path, name)
	}
	out := make([]float32, h.NumElements())
	return out, h, s.ReadFloat32At(h, 0, out)
}

// ReadFloat32At fills dst with elements [off, off+len(dst)) of tensor h
// (row-major, as stored), widened to float32 from F32, BF16 or F16. Only
// those bytes are read, so a range of a large tensor costs its own size.
func (s *SafetensorsFile) ReadFloat32At(h TensorHeader, off int, dst []float32) error {
	size, ok := stDTypeSize(h.DType)
	if !ok || (h.DType != "F32" && h.DType != "BF16" && h.DType != "F16") {
		return fmt.Errorf("safetensors %s: tensor %q is %s, want F32, BF16 or F16", s.path, h.Name, h.DType)
	}
	if off < 0 || off+len(dst) > h.NumElements() {
		return fmt.Errorf("safetensors %s: tensor %q: elements [%d, %d) outside its %d", s.path, h.Name, off, off+len(dst), h.NumElements())
	}
	const chunk = 1 << 20 // bytes per read: bounded memory for any tensor
	buf := make([]byte, min(chunk, len(dst)*size))
	at := s.dataStart + h.Begin + int64(off)*int64(size)
	for len(dst) > 0 {
		k := min(len(dst), len(buf)/size)
		raw := buf[:k*size]
		if _, err := s.f.ReadAt(raw, at); err != nil {
			return fmt.Errorf("safetensors %s: tensor %q: %w", s.path, h.Name, err)
		}
		switch h.DType {
		case "F32":
			for i := range k {
				dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
		case "BF16":
			for i := range k {
				dst[i] = backend.F32FromBF16(binary.LittleEndian.Uint16(raw[2*i:]))
			}
		case "F16":
			for i := range k {
				dst[i] = backend.F32FromF16(binary.LittleEndian.Uint16(raw[2*i:]))
			}
		}
		dst, at = dst[k:], at+int64(len(raw))
	}
	return nil
}

// ReadInt32 returns an I32 or I64 tensor as int32 (token ids).
func (s *SafetensorsFile) ReadInt32(name string) ([]int32, TensorHeader, error) {
	h, raw, err := s.Raw(name)
	if err != nil {
		return nil, h, err
	}
	out := make([]int32, h.NumElements())
	switch h.DType {
	case "I32":
		for i := range out {
			out[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case "I64":
		for i := range out {
			v := int64(binary.LittleEndian.Uint64(raw[8*i:]))
			if v < math.MinInt32 || v > math.MaxInt32 {
				return nil, h, fmt.Errorf("safetensors %s: tensor %q: element %d = %d does not fit int32", s.path, name, i, v)
			}
			out[i] = int32(v)
		}
	default:
		return nil, h, fmt.Errorf("safetensors %s: tensor %q is %s, want I32 or I64", s.path, name, h.DType)
	}
	return out, h, nil
}

// NamedTensor is one tensor to write: Data holds prod(Shape) elements of
// DType, little-endian.
type NamedTensor struct {
	Name  string
	DType backend.DType
	Shape []int
	Data  []byte
}

// EncodeFloat32 stores v as dt (F32, BF16 or F16; 16-bit values rounded to
// nearest-even) in little-endian bytes.
func EncodeFloat32(v []float32, dt backend.DType) []byte {
	out := make([]byte, len(v)*dt.Size())
	switch dt {
	case backend.F32:
		for i, x := range v {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
		}
	case backend.BF16:
		for i, x := range v {
			binary.LittleEndian.PutUint16(out[2*i:], backend.BF16FromF32(x))
		}
	case backend.F16:
		for i, x := range v {
			binary.LittleEndian.PutUint16(out[2*i:], backend.F16FromF32(x))
		}
	default:
		panic("model: EncodeFloat32 wants a float dtype")
	}
	return out
}

// EncodeInt32 stores v as little-endian I32 bytes.
func EncodeInt32(v []int32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(x))
	}
	return out
}

// WriteSafetensors writes tensors, in the given order, and meta (may be nil)
// as a safetensors stream. The header is padded with spaces to a multiple of
// 8 bytes so every tensor starts aligned.
func WriteSafetensors(w io.Writer, tensors []NamedTensor, meta map[string]string) error {
	st := make([]streamTensor, len(tensors))
	for i, t := range tensors {
		n := 1
		for _, d := range t.Shape {
			n *= d
		}
		if n >= 0 && len(t.Data) != n*t.DType.Size() {
			return fmt.Errorf("safetensors: tensor %q: %d bytes for %s%v (want %d)", t.Name, len(t.Data), t.DType, t.Shape, n*t.DType.Size())
		}
		st[i] = streamTensor{name: t.Name, dt: t.DType, shape: t.Shape, write: func(w io.Writer) error {
			_, err := w.Write(t.Data)
			return err
		}}
	}
	return writeSafetensorsStream(w, st, meta)
}

// streamTensor is one tensor of a safetensors stream whose data write
// produces on demand: prod(shape)·dt.Size() bytes, so a file larger than
// memory can be written tensor by tensor, chunk by chunk.
type streamTensor struct {
	name  string
	dt    backend.DType
	shape []int
	write func(w io.Writer) error
}

func (t streamTensor) bytes() int64 {
	n := int64(t.dt.Size())
	for _, d := range t.shape {
		n *= int64(d)
	}
	return n
}

// writeSafetensorsStream writes the header of tensors (in the given order)
// and meta, then each tensor's data as its write produces it, checking that
// it wrote exactly the bytes its header promised.
func writeSafetensorsStream(w io.Writer, tensors []streamTensor, meta map[string]string) error {
	var hdr bytes.Buffer
	hdr.WriteByte('{')
	if len(meta) > 0 {
		m, err := json.Marshal(meta)
		if err != nil {
			return fmt.Errorf("safetensors metadata: %w", err)
		}
		hdr.WriteString(`"__metadata__":`)
		hdr.Write(m)
	}
	seen := map[string]bool{}
	var off int64
	for i, t := range tensors {
		if t.name == "" || t.name == "__metadata__" || seen[t.name] {
			return fmt.Errorf("safetensors: tensor %d has a bad or repeated name %q", i, t.name)
		}
		seen[t.name] = true
		for _, d := range t.shape {
			if d < 0 {
				return fmt.Errorf("safetensors: tensor %q: negative dimension in %v", t.name, t.shape)
			}
		}
		if hdr.Len() > 1 {
			hdr.WriteByte(',')
		}
		name, _ := json.Marshal(t.name)
		shape := "["
		for j, d := range t.shape {
			if j > 0 {
				shape += ","
			}
			shape += strconv.Itoa(d)
		}
		shape += "]"
		fmt.Fprintf(&hdr, `%s:{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]}`, name, STDType(t.dt), shape, off, off+t.bytes())
		off += t.bytes()
	}
	hdr.WriteByte('}')
	for hdr.Len()%8 != 0 {
		hdr.WriteByte(' ')
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(hdr.Len()))
	bw.Write(lenBuf[:])
	bw.Write(hdr.Bytes())
	for _, t := range tensors {
		cw := &countingWriter{w: bw}
		if err := t.write(cw); err != nil {
			return fmt.Errorf("safetensors: tensor %q: %w", t.name, err)
		}
		if cw.n != t.bytes() {
			return fmt.Errorf("safetensors: tensor %q: wrote %d bytes for %s%v (want %d)", t.name, cw.n, t.dt, t.shape, t.bytes())
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// SaveSafetensors writes a safetensors file at path atomically: a kill or a
// full disk mid-write leaves the previous file as it was.
func SaveSafetensors(path string, tensors []NamedTensor, meta map[string]string) error {
	err := atomicfile.WriteWith(path, func(w io.Writer) error {
		return WriteSafetensors(w, tensors, meta)
	})
	if err != nil {
		return fmt.Errorf("save safetensors: %w", err)
	}
	return nil
}
