package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
)

func wantErr(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one saying %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// The defect: "vocab_size": 2⁶³−1 in a config.json was accepted, and
// PadVocab and NumParams overflowed into negative sizes (a panic further
// on). It must be an error naming the key and the value.
func TestHFConfigVocabSizeMaxInt64Refused(t *testing.T) {
	body := strings.Replace(gpt2ConfigJSON, `"vocab_size": 50257`, `"vocab_size": 9223372036854775807`, 1)
	path := writeFile(t, filepath.Join(t.TempDir(), "config.json"), body)
	_, err := LoadHFConfig(path)
	wantErr(t, err, path, `"vocab_size" = 9223372036854775807`, fmt.Sprint(MaxDim))
}

// The arithmetic itself must not wrap for any int: PadVocab passes an
// out-of-range v through for Validate to name, and NumParams of an invalid
// config is -1, never a wrapped count.
func TestPadVocabAndNumParamsDoNotOverflow(t *testing.T) {
	for _, v := range []int{math.MaxInt, math.MaxInt - 100, MaxDim + 1, -5, 0} {
		if p := PadVocab(v); p < v {
			t.Errorf("PadVocab(%d) = %d, smaller than its input", v, p)
		}
	}
	for _, c := range []Config{
		GPT2(Config{MaxT: 16, V: math.MaxInt, Vp: PadVocab(math.MaxInt), L: 2, NH: 2, C: 32}),
		GPT2(Config{MaxT: 16, V: 64, Vp: 128, L: math.MaxInt32, NH: 1, C: math.MaxInt32}),
		GPT2(Config{MaxT: 16, V: 64, Vp: 128, L: MaxDim, NH: 1, C: MaxDim}),
		GPT2(Config{MaxT: -1, V: 64, Vp: 128, L: 2, NH: 2, C: 32}),
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: valid", c)
		}
		if n := c.NumParams(); n != -1 {
			t.Errorf("%+v: NumParams %d, want -1 for an invalid config", c, n)
		}
		_ = c.String() // must not panic on an invalid config
	}
}

// The defect: a config.json with n_layer 100000 and n_embd 65536 (5·10¹⁵
// parameters) was accepted and the run went on for minutes. It must be
// refused in milliseconds, with the numbers.
func TestAbsurdModelConfigRefusedFast(t *testing.T) {
	body := strings.NewReplacer(`"n_layer": 12`, `"n_layer": 100000`, `"n_embd": 768`, `"n_embd": 65536`, `"n_head": 12`, `"n_head": 16`).Replace(gpt2ConfigJSON)
	path := writeFile(t, filepath.Join(t.TempDir(), "config.json"), body)
	start := time.Now()
	_, err := LoadHFConfig(path)
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %v", d)
	}
	wantErr(t, err, path, "n_layer = 100000", "n_embd = 65536", "5.2e+15 parameters", fmt.Sprint(int64(MaxParams)))
}

func mkfifo(t *testing.T, path string) string {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	return path
}

// within fails the test if f has not returned after d: the defect is a
// hang, which must show as a failure rather than a stuck test binary.
func within(t *testing.T, d time.Duration, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("still blocked after %v", d)
		return nil
	}
}

// The defect: a FIFO given as --init-from (any of the three names it can
// have) or as a model config.json blocked in open(2) forever.
func TestFIFOAsWeightsOrModelConfigIsRefusedQuickly(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"model.safetensors", "model.bin", "weights"} {
		fifo := mkfifo(t, filepath.Join(dir, name))
		err := within(t, 5*time.Second, func() error { _, _, err := InitFrom(fifo, &tinyConfig); return err })
		wantErr(t, err, fifo, "named pipe (FIFO)")
	}
	cfgDir := filepath.Join(dir, "hub")
	os.Mkdir(cfgDir, 0o755)
	fifo := mkfifo(t, filepath.Join(cfgDir, "config.json"))
	for _, arg := range []string{fifo, cfgDir} {
		err := within(t, 5*time.Second, func() error { _, err := ByName(arg); return err })
		wantErr(t, err, fifo, "named pipe (FIFO)")
	}
	// A device reads as an endless or empty stream: refused by name too.
	_, _, err := LoadLLMC("/dev/zero")
	wantErr(t, err, "/dev/zero", "character device")
	_, err = OpenSafetensors("/dev/zero")
	wantErr(t, err, "/dev/zero", "character device")
}

// llmcHeader builds an llm.c model file header with the given shape words
// (maxT, V, L, NH, C, Vp), followed by body bytes.
func llmcFile(version int32, shape [6]int32, body int) []byte {
	var hdr [llmcHeaderInts]int32
	hdr[0], hdr[1] = LLMCMagic, version
	copy(hdr[2:8], shape[:])
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, hdr)
	b.Write(make([]byte, body))
	return b.Bytes()
}

// Hostile llm.c headers: counts larger than the file, negative sizes,
// shapes whose products overflow. Each is a clear error naming the file,
// never a panic, and nothing near the header's claimed size is allocated.
func TestLLMCHostileHeaders(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct {
		b   []byte
		say string
	}{
		"negative V":          {llmcFile(3, [6]int32{16, -5, 2, 2, 32, 128}, 64), "vocab_size"},
		"negative C":          {llmcFile(3, [6]int32{16, 64, 2, 2, -32, 128}, 64), "n_embd"},
		"L·C² overflows":      {llmcFile(3, [6]int32{16, 64, math.MaxInt32, 1, math.MaxInt32, 128}, 64), "L (n_layer) = 2147483647"},
		"params past limit":   {llmcFile(3, [6]int32{16, 64, MaxDim, 1, MaxDim, 128}, 64), "parameters, more than"},
		"count beyond file":   {llmcFile(5, [6]int32{1024, 50257, 48, 25, 1600, 50304}, 4096), "needs 3"},
		"Vp below V":          {llmcFile(3, [6]int32{16, 64, 2, 2, 32, 8}, 64), "padded vocab Vp = 8"},
		"header cut short":    {llmcFile(3, [6]int32{16, 64, 2, 2, 32, 128}, 0)[:600], "truncated header"},
		"Vp past the maximum": {llmcFile(3, [6]int32{16, 64, 2, 2, 32, math.MaxInt32}, 64), "padded vocab Vp = 2147483647"},
	}
	for name, tc := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".bin")
		if err := os.WriteFile(path, tc.b, 0o644); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _, err := LoadLLMC(path)
		runtime.ReadMemStats(&after)
		t.Run(name, func(t *testing.T) {
			wantErr(t, err, path, tc.say)
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
				t.Errorf("allocated %d bytes for a %d-byte file", grew, len(tc.b))
			}
		})
	}
}

// FuzzHFConfig feeds arbitrary bytes to config.json's parser: it never
// panics, errors name the file, an accepted config is valid, so every
// count computed from it is exact, and the config.json gotrain writes for
// it reads back to the same Config.
func FuzzHFConfig(f *testing.F) {
	f.Add([]byte(gpt2ConfigJSON))
	f.Add([]byte(`{"n_embd": 16, "n_layer": 1, "n_head": 2, "n_ctx": 8, "vocab_size": 257}`))
	f.Add([]byte(`{"n_embd": 65536, "n_layer": 100000, "n_head": 16, "n_positions": 16, "vocab_size": 64}`))
	f.Add([]byte(`{"n_embd": 16, "n_layer": 1, "n_head": 2, "n_positions": 8, "vocab_size": 9223372036854775807}`))
	f.Add([]byte(`{"n_embd": -16}`))
	for _, c := range familyCases {
		for _, name := range []string{"config.json", "config_v5.json"} {
			if b, err := os.ReadFile(filepath.Join(fixtureDir(c), name)); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte(`{"model_type": "qwen3", "rope_parameters": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4}}`))
	f.Add([]byte(`{"model_type": "mistral", "sliding_window": 16, "pad_token_id": -3, "eos_token_id": [1, 2, 3, 4]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := ParseHFConfig("fuzz/config.json", b)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz/config.json") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted an invalid config %+v: %v", cfg, err)
		}
		padded := cfg.Vp%VocabPad == 0
		if cfg.Arch != ArchGPT2 {
			padded = cfg.Vp == cfg.V
		}
		if n := cfg.NumParams(); n < 1 || n > MaxParams || !padded {
			t.Fatalf("accepted %+v with %d params", cfg, n)
		}
		if fl := cfg.FlopsPerToken(cfg.MaxT); !(fl > 0) || math.IsInf(fl, 0) {
			t.Fatalf("FlopsPerToken of %+v = %v", cfg, fl)
		}
		doc := gpt2ConfigDoc(cfg)
		if cfg.Arch != ArchGPT2 {
			doc = familyConfigDoc(cfg)
		}
		out, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseHFConfig("fuzz/written.json", out)
		if err != nil || back != cfg {
			t.Fatalf("%+v written as %s reads back as %+v, %v", cfg, out, back, err)
		}
	})
}

// FuzzConfigRecord feeds arbitrary bytes to the Config record a
// checkpoint's meta.json carries: it never panics, and what it accepts is
// valid and records back to the same Config.
func FuzzConfigRecord(f *testing.F) {
	f.Add([]byte(`{"n_positions":8,"vocab_size":11,"padded_vocab_size":16,"n_layer":2,"n_head":2,"n_embd":8}`))
	for _, c := range familyCases {
		if cfg, err := LoadHFConfig(filepath.Join(fixtureDir(c), "config.json")); err == nil {
			b, _ := json.Marshal(cfg)
			f.Add(b)
		}
	}
	f.Add([]byte(`{"architecture":"qwen3","vocab_size":5,"rope":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var cfg Config
		if err := json.Unmarshal(b, &cfg); err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted an invalid record %+v: %v", cfg, err)
		}
		out, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var back Config
		if err := json.Unmarshal(out, &back); err != nil || back != cfg {
			t.Fatalf("%+v recorded as %s reads back as %+v, %v", cfg, out, back, err)
		}
	})
}

// FuzzLLMC feeds arbitrary bytes to the llm.c model file reader: it never
// panics, never allocates more weights than the file holds, and what it
// accepts is a valid config whose weights are exactly the file's bytes.
func FuzzLLMC(f *testing.F) {
	var good bytes.Buffer
	path := filepath.Join(f.TempDir(), "tiny.bin")
	if err := SaveLLMC(path, tinyConfig, randomParams(tinyConfig, 1), backend.BF16); err != nil {
		f.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	good.Write(raw)
	f.Add(good.Bytes())
	f.Add(llmcFile(3, [6]int32{8, 11, 1, 1, 4, 16}, 4*(16*4+8*4+12*16+13*4+2*4)))
	f.Add(llmcFile(3, [6]int32{16, 64, math.MaxInt32, 1, math.MaxInt32, 128}, 64))
	f.Add(llmcFile(5, [6]int32{1024, 50257, 48, 25, 1600, 50304}, 64))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, params, err := readLLMC("fuzz.bin", bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.bin") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted an invalid header %+v: %v", cfg, err)
		}
		width := 4
		if int32(binary.LittleEndian.Uint32(b[4:])) == LLMCVersionBF16 {
			width = 2
		}
		if len(params) != cfg.NumParams() || 4*llmcHeaderInts+width*len(params) != len(b) {
			t.Fatalf("accepted %d bytes as %d params of width %d", len(b), len(params), width)
		}
	})
}
