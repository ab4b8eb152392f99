package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// exact holds values every float dtype stores without rounding.
var exact = []float32{0, 1, -2, 0.5, 0.375, -1024, 3.25, -0.125}

func sampleTensors() []NamedTensor {
	return []NamedTensor{
		{Name: "a.f32", DType: backend.F32, Shape: []int{2, 4}, Data: EncodeFloat32(exact, backend.F32)},
		{Name: "b.bf16", DType: backend.BF16, Shape: []int{8}, Data: EncodeFloat32(exact, backend.BF16)},
		{Name: "c.f16", DType: backend.F16, Shape: []int{4, 2}, Data: EncodeFloat32(exact, backend.F16)},
		{Name: "d.i32", DType: backend.I32, Shape: []int{3}, Data: EncodeInt32([]int32{7, -1, 50256})},
		{Name: "e.scalar", DType: backend.F32, Shape: []int{}, Data: EncodeFloat32([]float32{42}, backend.F32)},
		{Name: "f.empty", DType: backend.F32, Shape: []int{0, 3}, Data: nil},
	}
}

func TestSafetensorsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.safetensors")
	meta := map[string]string{"format": "pt", "note": "ü"}
	if err := SaveSafetensors(path, sampleTensors(), meta); err != nil {
		t.Fatal(err)
	}
	// The container, read independently of the parser.
	raw, _ := os.ReadFile(path)
	hlen := binary.LittleEndian.Uint64(raw)
	if (8+hlen)%8 != 0 {
		t.Errorf("data section starts at %d, not 8-aligned", 8+hlen)
	}
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(raw[8:8+hlen], &hdr); err != nil {
		t.Fatalf("header is not JSON: %v", err)
	}
	var ent struct {
		DType   string  `json:"dtype"`
		Shape   []int   `json:"shape"`
		Offsets []int64 `json:"data_offsets"`
	}
	json.Unmarshal(hdr["c.f16"], &ent)
	if ent.DType != "F16" || !equalShape(ent.Shape, []int{4, 2}) || ent.Offsets[1]-ent.Offsets[0] != 16 {
		t.Errorf("c.f16 entry %+v", ent)
	}
	// IEEE half of 0.5 is 0x3800.
	if h := binary.LittleEndian.Uint16(raw[8+int(hlen)+int(ent.Offsets[0])+6:]); h != 0x3800 {
		t.Errorf("c.f16[3] bits %#x, want 0x3800", h)
	}

	st, err := OpenSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.Metadata()["format"] != "pt" || st.Metadata()["note"] != "ü" {
		t.Errorf("metadata %v", st.Metadata())
	}
	for _, name := range []string{"a.f32", "b.bf16", "c.f16"} {
		v, h, err := st.ReadFloat32(name)
		if err != nil || len(v) != len(exact) {
			t.Fatalf("%s: %v", name, err)
		}
		for i := range v {
			if v[i] != exact[i] {
				t.Errorf("%s[%d] = %v, want %v", name, i, v[i], exact[i])
			}
		}
		if h.NumElements() != 8 {
			t.Errorf("%s: %d elements", name, h.NumElements())
		}
	}
	ids, _, err := st.ReadInt32("d.i32")
	if err != nil || ids[0] != 7 || ids[1] != -1 || ids[2] != 50256 {
		t.Errorf("d.i32 = %v, %v", ids, err)
	}
	if v, h, err := st.ReadFloat32("e.scalar"); err != nil || len(v) != 1 || v[0] != 42 || len(h.Shape) != 0 {
		t.Errorf("scalar = %v %v %v", v, h, err)
	}
	if v, _, err := st.ReadFloat32("f.empty"); err != nil || len(v) != 0 {
		t.Errorf("empty = %v %v", v, err)
	}
	if _, _, err := st.ReadFloat32("d.i32"); err == nil || !strings.Contains(err.Error(), "d.i32") {
		t.Errorf("reading ints as floats: %v", err)
	}
	if _, _, err := st.ReadFloat32("nope"); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("missing tensor: %v", err)
	}
}

func TestSafetensorsRounding(t *testing.T) {
	// 1 + 2^-9 lies between two bf16 values and ties to the even one (1);
	// 1 + 3·2^-9 rounds up to 1 + 2^-7.
	v := []float32{1 + 1.0/512, 1 + 3.0/512}
	path := filepath.Join(t.TempDir(), "r.safetensors")
	if err := SaveSafetensors(path, []NamedTensor{{Name: "x", DType: backend.BF16, Shape: []int{2}, Data: EncodeFloat32(v, backend.BF16)}}, nil); err != nil {
		t.Fatal(err)
	}
	st, err := OpenSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, _, _ := st.ReadFloat32("x")
	if got[0] != 1 || got[1] != 1+1.0/128 {
		t.Errorf("bf16 rounding: %v", got)
	}
}

// craft builds a safetensors file from a literal header and data size.
func craft(header string, dataLen int) []byte {
	out := make([]byte, 8, 8+len(header)+dataLen)
	binary.LittleEndian.PutUint64(out, uint64(len(header)))
	out = append(out, header...)
	return append(out, make([]byte, dataLen)...)
}

func TestSafetensorsCorrupt(t *testing.T) {
	good := `{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}}`
	cases := []struct {
		name   string
		file   []byte
		tensor string // the tensor the error must name, if any
	}{
		{"short", []byte{1, 2, 3}, ""},
		{"huge header length", append([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, "{}"...), ""},
		{"header past end", func() []byte { b := craft(good, 24); binary.LittleEndian.PutUint64(b, uint64(len(good)+100)); return b }(), ""},
		{"not json", craft(`{"w":`, 0), ""},
		{"not object", craft(`[1,2]`, 0), ""},
		{"trailing", craft(`{} {}`, 0), ""},
		{"truncated data", craft(good, 20), "b"},
		{"offset past end", craft(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`, 8), "w"},
		{"size mismatch", craft(`{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8), "w"},
		{"reversed", craft(`{"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, 8), "w"},
		{"overlap", craft(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"v":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12), "v"},
		{"unknown dtype", craft(`{"w":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}}`, 8), "w"},
		{"negative dim", craft(`{"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, 8), "w"},
		{"fractional dim", craft(`{"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,8]}}`, 8), "w"},
		{"huge shape", craft(`{"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, 8), "w"},
		{"missing offsets", craft(`{"w":{"dtype":"F32","shape":[2]}}`, 8), "w"},
		{"three offsets", craft(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]}}`, 9), "w"},
		{"duplicate", craft(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8), "w"},
		{"bad metadata", craft(`{"__metadata__":{"a":1}}`, 0), ""},
		{"entry not object", craft(`{"w":7}`, 0), "w"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".safetensors")
		if err := os.WriteFile(path, c.file, 0o644); err != nil {
			t.Fatal(err)
		}
		st, err := OpenSafetensors(path)
		if err == nil {
			st.Close()
			t.Errorf("%s: opened without error", c.name)
			continue
		}
		if !strings.Contains(err.Error(), path) || (c.tensor != "" && !strings.Contains(err.Error(), `"`+c.tensor+`"`)) {
			t.Errorf("%s: error %q should name the file and tensor %q", c.name, err, c.tensor)
		}
	}
	// The good header itself opens.
	path := filepath.Join(dir, "good.safetensors")
	os.WriteFile(path, craft(good, 24), 0o644)
	st, err := OpenSafetensors(path)
	if err != nil {
		t.Fatalf("good file: %v", err)
	}
	st.Close()
}

func TestWriteSafetensorsRejects(t *testing.T) {
	var buf bytes.Buffer
	bad := [][]NamedTensor{
		{{Name: "x", DType: backend.F32, Shape: []int{3}, Data: make([]byte, 8)}},
		{{Name: "x", DType: backend.F32, Shape: []int{1}, Data: make([]byte, 4)}, {Name: "x", DType: backend.F32, Shape: []int{1}, Data: make([]byte, 4)}},
		{{Name: "__metadata__", DType: backend.F32, Shape: []int{1}, Data: make([]byte, 4)}},
		{{Name: "", DType: backend.F32, Shape: []int{1}, Data: make([]byte, 4)}},
	}
	for i, ts := range bad {
		if err := WriteSafetensors(&buf, ts, nil); err == nil {
			t.Errorf("case %d written without error", i)
		}
	}
}

func FuzzSafetensorsHeader(f *testing.F) {
	var buf bytes.Buffer
	WriteSafetensors(&buf, sampleTensors(), map[string]string{"format": "pt"})
	f.Add(buf.Bytes())
	f.Add(craft(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8))
	f.Add(craft(`{"w":{"dtype":"BF16","shape":[2,0],"data_offsets":[0,0]},"__metadata__":{}}`, 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parseSafetensors(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		dataLen := int64(len(data)) - s.dataStart
		var end int64
		for _, h := range s.Tensors() {
			size, ok := stDTypeSize(h.DType)
			if !ok || h.Begin < end || h.End > dataLen || h.End-h.Begin != int64(h.NumElements()*size) {
				t.Fatalf("accepted bad entry %+v", h)
			}
			end = max(end, h.End)
		}
	})
}
