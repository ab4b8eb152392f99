package data

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// rawShard builds shard bytes by hand, independently of the package's
// writer: a [256]int32 header with the given words, then tokens of width w.
func rawShard(t testing.TB, magic, version, ntok int32, w int, tokens []uint32) []byte {
	t.Helper()
	var hdr [256]int32
	hdr[0], hdr[1], hdr[2] = magic, version, ntok
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, hdr); err != nil {
		t.Fatal(err)
	}
	for _, v := range tokens {
		var err error
		if w == 2 {
			err = binary.Write(&buf, binary.LittleEndian, uint16(v))
		} else {
			err = binary.Write(&buf, binary.LittleEndian, v)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func writeFile(t testing.TB, path string, b []byte) string {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestShardRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		format  ShardFormat
		magic   int32
		version int32
		width   int
		maxTok  int32
	}{
		{ShardGPT2, 20240520, 1, 2, 65535},
		{ShardLlama3, 20240801, 7, 4, 1<<31 - 1},
	} {
		t.Run(tc.format.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			toks := make([]int32, 5000)
			for i := range toks {
				toks[i] = r.Int32N(tc.maxTok)
			}
			toks[0], toks[1] = 0, tc.maxTok
			path := filepath.Join(t.TempDir(), "train_000000.bin")
			if err := WriteShard(path, tc.format, toks); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if want := 1024 + tc.width*len(toks); len(raw) != want {
				t.Fatalf("file size %d, want 1024 + %d·%d = %d", len(raw), tc.width, len(toks), want)
			}
			var hdr [256]int32
			if err := binary.Read(bytes.NewReader(raw), binary.LittleEndian, &hdr); err != nil {
				t.Fatal(err)
			}
			if hdr[0] != tc.magic || hdr[1] != tc.version || hdr[2] != int32(len(toks)) {
				t.Fatalf("header words %v, want magic %d version %d count %d", hdr[:3], tc.magic, tc.version, len(toks))
			}
			// Words 3-5 record the largest id (marker, id, count again);
			// llm.c reads none of them, and the rest stay zero as it writes.
			largest := slices.Max(toks)
			if hdr[3] != maxTokenMarker || hdr[4] != largest || hdr[5] != int32(len(toks)) {
				t.Fatalf("header words 3-5 = %v, want marker %#x, largest id %d, count %d", hdr[3:6], maxTokenMarker, largest, len(toks))
			}
			for i, v := range hdr[6:] {
				if v != 0 {
					t.Fatalf("header word %d = %d, want 0", i+6, v)
				}
			}
			for i, want := range toks {
				var got int32
				if tc.width == 2 {
					got = int32(binary.LittleEndian.Uint16(raw[1024+2*i:]))
				} else {
					got = int32(binary.LittleEndian.Uint32(raw[1024+4*i:]))
				}
				if got != want {
					t.Fatalf("raw token %d = %d, want %d", i, got, want)
				}
			}

			h, got, err := ReadShard(path)
			if err != nil {
				t.Fatal(err)
			}
			if h.Format != tc.format || h.NumTokens != int64(len(toks)) || !h.HasMaxToken || h.MaxToken != int64(largest) {
				t.Fatalf("header %+v", h)
			}
			if !slicesEqual(got, toks) {
				t.Fatal("ReadShard tokens differ from what was written")
			}
			h2, got2, err := ReadShardFrom(path, bytes.NewReader(raw))
			if err != nil || h2 != h || !slicesEqual(got2, toks) {
				t.Fatalf("ReadShardFrom: %+v %v", h2, err)
			}
			h3, err := ReadShardHeader(path)
			if err != nil || h3 != h {
				t.Fatalf("ReadShardHeader: %+v %v", h3, err)
			}
			if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
				t.Fatalf("directory holds %d entries, want only the shard (no temp file)", len(ents))
			}
		})
	}
}

// modded-nanogpt and llm.c shards are read as they are: built here by hand.
func TestReadForeignShards(t *testing.T) {
	dir := t.TempDir()
	toks := []uint32{50256, 15496, 995, 0, 65535}
	p := writeFile(t, filepath.Join(dir, "fineweb_train_000001.bin"), rawShard(t, 20240520, 1, 5, 2, toks))
	_, got, err := ReadShard(p)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range toks {
		if got[i] != int32(v) {
			t.Fatalf("token %d = %d, want %d", i, got[i], v)
		}
	}
	l3 := []uint32{128000, 9906, 1917, 128001, 70000}
	p = writeFile(t, filepath.Join(dir, "llama3.bin"), rawShard(t, 20240801, 7, 5, 4, l3))
	h, got, err := ReadShard(p)
	if err != nil {
		t.Fatal(err)
	}
	if h.Format != ShardLlama3 {
		t.Fatalf("format %v, want llama3", h.Format)
	}
	for i, v := range l3 {
		if got[i] != int32(v) {
			t.Fatalf("llama3 token %d = %d, want %d", i, got[i], v)
		}
	}
}

func TestShardHeaderErrors(t *testing.T) {
	text := []byte(strings.Repeat("Hello world, this is a text file.\n", 40))
	cases := []struct {
		name   string
		data   []byte
		reason []string
	}{
		{"empty", nil, []string{"empty file"}},
		{"tiny", []byte{1, 2}, []string{"truncated", "2 bytes"}},
		{"magic", rawShard(t, 12345, 1, 1, 2, []uint32{1}), []string{"wrong magic 12345", "expected 20240520"}},
		{"model", rawShard(t, 20240326, 3, 1024, 4, nil), []string{"wrong magic 20240326", "model weights"}},
		{"tokenizer", rawShard(t, 20240328, 2, 50257, 4, nil), []string{"wrong magic 20240328", "tokenizer file"}},
		{"state", rawShard(t, 20240527, 1, 1, 4, nil), []string{"wrong magic 20240527", "training state"}},
		{"text", text, []string{"wrong magic", "text file", "gotrain data prepare"}},
		{"bigendian", binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 20240520), 1), []string{"wrong magic", "big-endian"}},
		{"version", rawShard(t, 20240520, 2, 1, 2, []uint32{7}), []string{"unsupported version 2", "expected version 1"}},
		{"llama3version", rawShard(t, 20240801, 1, 1, 4, []uint32{7}), []string{"unsupported version 1", "expected version 7"}},
		{"shortheader", rawShard(t, 20240520, 1, 1, 2, nil)[:500], []string{"truncated header", "500 bytes"}},
		{"negative", rawShard(t, 20240520, 1, -5, 2, nil), []string{"token count -5 is negative"}},
		{"zerotokens", rawShard(t, 20240520, 1, 0, 2, nil), []string{"empty shard", "token count is 0"}},
		{"truncated", rawShard(t, 20240520, 1, 10, 2, []uint32{1, 2, 3, 4, 5, 6}), []string{"truncated", "expected 1044 bytes, found 1036"}},
		{"trailing", rawShard(t, 20240520, 1, 3, 2, []uint32{1, 2, 3, 4, 5}), []string{"trailing bytes", "4 extra"}},
	}
	dir := t.TempDir()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, filepath.Join(dir, tc.name+"_shard.bin"), tc.data)
			check := func(what string, err error) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s: no error", what)
				}
				msg := err.Error()
				if !strings.Contains(msg, path) {
					t.Errorf("%s: error %q does not name the file", what, msg)
				}
				for _, r := range tc.reason {
					if !strings.Contains(msg, r) {
						t.Errorf("%s: error %q does not say %q", what, msg, r)
					}
				}
				var se *ShardError
				if !errors.As(err, &se) || se.Path != path {
					t.Errorf("%s: error %v is not a *ShardError for the file", what, err)
				}
			}
			_, _, err := ReadShard(path)
			check("ReadShard", err)
			_, err = ReadShardHeader(path)
			check("ReadShardHeader", err)
			_, _, err = ReadShardFrom(path, bytes.NewReader(tc.data))
			check("ReadShardFrom", err)
		})
	}
}

func TestShardWriterRefusesBadTokens(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		format ShardFormat
		tok    int32
	}{{ShardGPT2, 65536}, {ShardGPT2, -1}, {ShardLlama3, -1}} {
		path := filepath.Join(dir, "bad.bin")
		err := WriteShard(path, tc.format, []int32{1, 2, tc.tok})
		if err == nil || !strings.Contains(err.Error(), "does not fit") || !strings.Contains(err.Error(), path) {
			t.Fatalf("token %d in %v: error %v", tc.tok, tc.format, err)
		}
	}
	if err := WriteShard(filepath.Join(dir, "empty.bin"), ShardGPT2, nil); err == nil {
		t.Fatal("an empty shard was published")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("failed writes left %d files behind", len(ents))
	}
}

func TestShardWriterStreams(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.bin")
	w, err := CreateShard(path, ShardGPT2)
	if err != nil {
		t.Fatal(err)
	}
	var want []int32
	for i := range 100 {
		chunk := make([]int32, i*700) // crosses the encode buffer size
		for j := range chunk {
			chunk[j] = int32((i*7 + j) % 65536)
		}
		want = append(want, chunk...)
		if err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("shard visible under its final name before Close")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, got, err := ReadShard(path)
	if err != nil || !slicesEqual(got, want) {
		t.Fatalf("streamed shard differs: %v", err)
	}
}

func slicesEqual(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func FuzzReadShard(f *testing.F) {
	f.Add([]byte{})
	f.Add(rawShard(f, 20240520, 1, 3, 2, []uint32{50256, 15496, 995}))
	f.Add(rawShard(f, 20240801, 7, 2, 4, []uint32{128000, 1}))
	f.Add(rawShard(f, 20240520, 1, 1<<30, 2, []uint32{1}))
	f.Add(rawShard(f, 20240520, 1, -1, 2, nil))
	f.Add([]byte("Hello world"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, toks, err := ReadShardFrom("fuzz.bin", bytes.NewReader(b))
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.bin") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		w := h.Format.TokenBytes()
		if h.HasMaxToken && (h.MaxToken < 0 || h.MaxToken > h.Format.MaxToken()) {
			t.Fatalf("accepted a max-token record %d the %s format cannot hold", h.MaxToken, h.Format)
		}
		if int64(len(b)) != h.FileBytes() || int64(len(toks)) != h.NumTokens {
			t.Fatalf("accepted %d bytes as %d tokens of width %d", len(b), len(toks), w)
		}
		for i, v := range toks {
			var raw uint32
			if w == 2 {
				raw = uint32(binary.LittleEndian.Uint16(b[1024+2*i:]))
			} else {
				raw = binary.LittleEndian.Uint32(b[1024+4*i:])
			}
			if uint32(v) != raw {
				t.Fatalf("token %d = %d, bytes say %d", i, v, raw)
			}
		}
	})
}
