package model

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/internal/atomicfile"
	"github.com/gotrain/gotrain/internal/regularfile"
)

// llm.c model files (train_gpt2.py write_model): 256 little-endian int32s of
// header, then the 16 tensors back to back with no padding, each stacked over
// all L layers ("ln_1.weight of block 0, of block 1, …, then ln_1.bias …"),
// which is not gotrain's block-contiguous order.
const (
	LLMCMagic       = 20240326
	LLMCVersionF32  = 3
	LLMCVersionBF16 = 5
	llmcHeaderInts  = 256
)

// llmcOrder lists the layout's tensors in llm.c's file order. lay is a
// GPT-2 layout.
func llmcOrder(lay *Layout) []Tensor {
	cfg := lay.Config()
	get := func(name string) Tensor {
		t, ok := lay.Lookup(name)
		if !ok {
			panic("model: layout is missing " + name)
		}
		return t
	}
	var order []Tensor
	for _, s := range cfg.specs() {
		if !s.block {
			order = append(order, get(s.name))
			continue
		}
		for l := 0; l < cfg.L; l++ {
			order = append(order, get(cfg.blockPrefix(l)+s.name))
		}
	}
	return order
}

// LoadLLMC reads an llm.c model file (version 3: fp32, version 5: bf16) into
// host weights in gotrain's flat layout.
func LoadLLMC(path string) (Config, []float32, error) {
	f, st, err := regularfile.Open("llm.c model", path)
	if err != nil {
		return Config{}, nil, err
	}
	defer f.Close()
	return readLLMC(path, f, st.Size())
}

// readLLMC reads an llm.c model file of size bytes from r; name is used in
// errors. The header is untrusted: its shape is validated (Config.Validate
// bounds every dimension and the parameter count) and the file's size must
// be exactly what the shape needs before the weights are allocated, so no
// header makes it allocate more than the file holds.
func readLLMC(name string, r io.ReaderAt, size int64) (Config, []float32, error) {
	var raw [4 * llmcHeaderInts]byte
	if size < int64(len(raw)) {
		return Config{}, nil, fmt.Errorf("load %s: truncated header (%d bytes, want at least %d)", name, size, len(raw))
	}
	if _, err := r.ReadAt(raw[:], 0); err != nil {
		return Config{}, nil, fmt.Errorf("load %s: read header: %w", name, err)
	}
	var hdr [llmcHeaderInts]int32
	for i := range hdr {
		hdr[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	if hdr[0] != LLMCMagic {
		return Config{}, nil, fmt.Errorf("load %s: bad magic %d, want %d (an llm.c model file)", name, hdr[0], LLMCMagic)
	}
	var dt backend.DType
	switch hdr[1] {
	case LLMCVersionF32:
		dt = backend.F32
	case LLMCVersionBF16:
		dt = backend.BF16
	default:
		return Config{}, nil, fmt.Errorf("load %s: llm.c model version %d, want %d (fp32) or %d (bf16)", name, hdr[1], LLMCVersionF32, LLMCVersionBF16)
	}
	cfg := GPT2(Config{MaxT: int(hdr[2]), V: int(hdr[3]), L: int(hdr[4]), NH: int(hdr[5]), C: int(hdr[6]), Vp: int(hdr[7])})
	if err := cfg.Validate(); err != nil {
		return Config{}, nil, fmt.Errorf("load %s: header: %w", name, err)
	}
	// Validate bounds the count by MaxParams, so the byte count cannot
	// overflow.
	n := cfg.NumParams()
	if want := int64(4*llmcHeaderInts) + int64(n)*int64(dt.Size()); size != want {
		return Config{}, nil, fmt.Errorf("load %s: file is %d bytes, but the header (%v, %s) needs %d", name, size, cfg, dt, want)
	}
	lay := NewLayout(cfg)
	params := make([]float32, n)
	buf := make([]byte, 0, 1<<20)
	off := int64(4 * llmcHeaderInts)
	for _, t := range llmcOrder(lay) {
		dst := params[t.Offset : t.Offset+t.Len]
		for len(dst) > 0 {
			k := min(len(dst), cap(buf)/dt.Size())
			b := buf[:k*dt.Size()]
			if _, err := r.ReadAt(b, off); err != nil {
				return Config{}, nil, fmt.Errorf("load %s: tensor %s: %w", name, t.Name, err)
			}
			off += int64(len(b))
			for i := range k {
				if dt == backend.F32 {
					dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
				} else {
					dst[i] = backend.F32FromBF16(binary.LittleEndian.Uint16(b[2*i:]))
				}
			}
			dst = dst[k:]
		}
		if err := checkFinite(name, t.Name, t.Shape, params[t.Offset:t.Offset+t.Len], 0); err != nil {
			return Config{}, nil, err
		}
	}
	return cfg, params, nil
}

// SaveLLMC writes host weights as an llm.c model file: dt F32 gives
// version 3, BF16 version 5 (rounded to nearest-even).
func SaveLLMC(path string, cfg Config, params []float32, dt backend.DType) error {
	var version int32
	switch dt {
	case backend.F32:
		version = LLMCVersionF32
	case backend.BF16:
		version = LLMCVersionBF16
	default:
		return fmt.Errorf("save %s: llm.c model files hold fp32 or bf16, not %s", path, dt)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	if cfg.Arch != ArchGPT2 {
		return fmt.Errorf("save %s: llm.c model files hold GPT-2 only, not %s; save Hugging Face safetensors instead", path, cfg.Arch)
	}
	lay := NewLayout(cfg)
	if len(params) != lay.NumParams() {
		return fmt.Errorf("save %s: %d values for %d parameters", path, len(params), lay.NumParams())
	}
	err := atomicfile.WriteWith(path, func(f io.Writer) error {
		w := bufio.NewWriterSize(f, 1<<20)
		var hdr [llmcHeaderInts]int32
		hdr[0], hdr[1] = LLMCMagic, version
		hdr[2], hdr[3], hdr[4], hdr[5], hdr[6], hdr[7] = int32(cfg.MaxT), int32(cfg.V), int32(cfg.L), int32(cfg.NH), int32(cfg.C), int32(cfg.Vp)
		binary.Write(w, binary.LittleEndian, &hdr)
		for _, t := range llmcOrder(lay) {
			w.Write(EncodeFloat32(params[t.Offset:t.Offset+t.Len], dt))
		}
		return w.Flush()
	})
	if err != nil {
		return fmt.Errorf("save llm.c model: %w", err)
	}
	return nil
}
