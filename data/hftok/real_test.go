package hftok

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/gotrain/gotrain/data/hftok/hftoktest"
)

// loadReal loads a real tokenizer from the fetched files, once per test
// binary (loading takes a few hundred milliseconds).
func loadReal(t *testing.T, name string) *Tokenizer {
	t.Helper()
	dir := hftoktest.Dir(t, name)
	realOnce.Lock()
	defer realOnce.Unlock()
	if tok, ok := realLoaded[name]; ok {
		return tok
	}
	tok, err := loadDir(dir, nil)
	if err != nil {
		t.Fatalf("load %s: %v", dir, err)
	}
	realLoaded[name] = tok
	return tok
}

var (
	realOnce   sync.Mutex
	realLoaded = map[string]*Tokenizer{}
)

// loadDir loads dir's tokenizer.json and tokenizer_config.json; postProcessor,
// if not nil, replaces the file's post_processor.
func loadDir(dir string, postProcessor json.RawMessage) (*Tokenizer, error) {
	b, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	if postProcessor != nil {
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, err
		}
		doc["post_processor"] = postProcessor
		if b, err = json.Marshal(doc); err != nil {
			return nil, err
		}
	}
	cb, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(cb)
	if err != nil {
		return nil, err
	}
	return Load(b, cfg)
}

// refFile is data/testdata/tokenizer_refs/*.json, made by
// scripts/tokenizer_refs.mjs with the JavaScript port of tokenizers.
type refFile struct {
	TokenizerSHA256  string          `json:"tokenizer_sha256"`
	CorpusSHA256     string          `json:"corpus_sha256"`
	DecodeNormalizes bool            `json:"decode_normalizes_nfc"`
	PostForSpecial   json.RawMessage `json:"post_processor_for_special"`
	Cases            []refCase       `json:"cases"`
	WholeFile        refCase         `json:"whole_file"`
}

type refCase struct {
	Text       string `json:"text"`
	IDs        []int  `json:"ids"`
	IDsSpecial []int  `json:"ids_special"`
}

// readRefs reads the reference file of name and checks that it was made
// from the committed corpus and the fetched tokenizer file, case by case.
func readRefs(t *testing.T, name string) refFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "tokenizer_refs", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var r refFile
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	corpus, err := os.ReadFile(filepath.Join("..", "testdata", "tokenizer_corpus.txt"))
	if err != nil {
		t.Fatal(err)
	}
	tj, err := os.ReadFile(filepath.Join(hftoktest.Dir(t, name), "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if sha(corpus) != r.CorpusSHA256 || sha(tj) != r.TokenizerSHA256 {
		t.Fatalf("%s.json was made from another corpus or tokenizer.json: run node scripts/tokenizer_refs.mjs", name)
	}
	lines := strings.Split(strings.TrimSuffix(string(corpus), "\n"), "\n")
	if len(lines) != len(r.Cases) || r.WholeFile.Text != string(corpus) {
		t.Fatalf("%s.json has %d cases, the corpus %d lines", name, len(r.Cases), len(lines))
	}
	for i, l := range lines {
		if r.Cases[i].Text != l {
			t.Fatalf("case %d is %q, corpus line %q", i, r.Cases[i].Text, l)
		}
	}
	return r
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func TestRealTokenizersMatchReferenceIDs(t *testing.T) {
	for _, name := range []string{"qwen3", "llama3"} {
		t.Run(name, func(t *testing.T) {
			tok := loadReal(t, name)
			refs := readRefs(t, name)
			special := tok
			if refs.PostForSpecial != nil {
				var err error
				if special, err = loadDir(hftoktest.Dir(t, name), refs.PostForSpecial); err != nil {
					t.Fatal(err)
				}
			}
			bad := 0
			for i, c := range append(refs.Cases, refs.WholeFile) {
				got := tok.Encode(c.Text, EncodeOptions{})
				if !slices.Equal(got, c.IDs) {
					bad++
					t.Errorf("case %d %q:\n got %v\nwant %v", i, c.Text, got, c.IDs)
				}
				if got := special.Encode(c.Text, EncodeOptions{AddSpecialTokens: true}); !slices.Equal(got, c.IDsSpecial) {
					t.Errorf("case %d %q with special tokens:\n got %v\nwant %v", i, c.Text, got, c.IDsSpecial)
				}
				want := c.Text
				if refs.DecodeNormalizes {
					want = norm.NFC.String(want)
				}
				if back := tok.Decode(c.IDs, false); back != want {
					t.Errorf("case %d: Decode = %q, want %q", i, back, want)
				}
				if bad > 5 {
					t.Fatal("too many mismatches")
				}
			}
		})
	}
}

// The test vectors published in hf-models-and-tokenizers §5.9 (a Python
// implementation cross-checked against the JavaScript tokenizer).
func TestRealTokenizersPublishedVectors(t *testing.T) {
	for _, tc := range []struct {
		text          string
		qwen3, llama3 []int
	}{
		{"Hello world", []int{9707, 1879}, []int{9906, 1917}},
		{"Hello, world! 12345 tokens", []int{9707, 11, 1879, 0, 220, 16, 17, 18, 19, 20, 11211}, []int{9906, 11, 1917, 0, 220, 4513, 1774, 11460}},
		{"  leading spaces and trailing  ", []int{220, 6388, 12621, 323, 27748, 256}, []int{220, 6522, 12908, 323, 28848, 256}},
		{"emoji 🤗🦙 ok", []int{37523, 11162, 97, 245, 149955, 5394}, []int{38623, 11410, 97, 245, 9468, 99, 247, 5509}},
		{"line1\nline2\r\n\n\ttab", []int{1056, 16, 198, 1056, 17, 80823, 58149}, []int{1074, 16, 198, 1074, 17, 81923, 59249}},
		{"I'm you'll they'VE WE'D", []int{40, 2776, 498, 3278, 807, 6, 4491, 19677, 27705}, []int{40, 2846, 499, 3358, 814, 6, 4592, 20255, 28805}},
		{"x=1234567;y=89", []int{87, 28, 16, 17, 18, 19, 20, 21, 22, 70863, 28, 23, 24}, []int{87, 28, 4513, 10961, 22, 71963, 28, 4578}},
		{"   \n\n   x", []int{33933, 256, 856}, []int{35033, 256, 865}},
		{"中文测试，你好世界", []int{104811, 81705, 3837, 108386, 99489}, []int{108891, 82805, 104660, 53901, 102616}},
		{"<think>\n\n</think>\n\n", []int{151667, 271, 151668, 271}, []int{14023, 771, 1363, 524, 27963, 1363}},
		{"a<|endoftext|>b", []int{64, 151643, 65}, []int{64, 27, 91, 8862, 728, 428, 91, 29, 65}},
	} {
		for _, m := range []struct {
			name string
			want []int
		}{{"qwen3", tc.qwen3}, {"llama3", tc.llama3}} {
			if got := loadReal(t, m.name).Encode(tc.text, EncodeOptions{}); !slices.Equal(got, m.want) {
				t.Errorf("%s %q:\n got %v\nwant %v", m.name, tc.text, got, m.want)
			}
		}
	}
}

// What the two files say about themselves (hf-models-and-tokenizers §5.1,
// §6.1), and the NFC difference of §5.3.
func TestRealTokenizersFacts(t *testing.T) {
	q, l := loadReal(t, "qwen3"), loadReal(t, "llama3")
	if q.VocabSize() != 151669 || l.VocabSize() != 128256 {
		t.Errorf("vocab sizes %d %d", q.VocabSize(), l.VocabSize())
	}
	qc, lc := q.Config(), l.Config()
	if qc.BOS.ID != -1 || qc.EOS.ID != 151645 || qc.PAD.ID != 151643 || qc.CleanUpTokenizationSpaces || len(qc.ChatTemplate) != 4116 {
		t.Errorf("qwen3 config: bos %+v eos %+v pad %+v cleanup %v template %d chars", qc.BOS, qc.EOS, qc.PAD, qc.CleanUpTokenizationSpaces, len(qc.ChatTemplate))
	}
	if lc.BOS.ID != 128000 || lc.EOS.ID != 128001 || lc.PAD.ID != -1 || !lc.CleanUpTokenizationSpaces || len(lc.ChatTemplate) != 348 {
		t.Errorf("llama3 config: bos %+v eos %+v pad %+v cleanup %v template %d chars", lc.BOS, lc.EOS, lc.PAD, lc.CleanUpTokenizationSpaces, len(lc.ChatTemplate))
	}
	if len(q.AddedTokens()) != 26 || len(l.AddedTokens()) != 256 || !q.IsSpecial(151644) || q.IsSpecial(151667) {
		t.Errorf("added tokens: %d %d", len(q.AddedTokens()), len(l.AddedTokens()))
	}
	if len(q.TemplatePrefix()) != 0 || len(l.TemplatePrefix()) != 0 {
		t.Errorf("the packaged files add no BOS: %v %v", q.TemplatePrefix(), l.TemplatePrefix())
	}
	nfd, nfc := "e\u0301", "\u00e9"
	if a, b := q.Encode(nfd, EncodeOptions{}), q.Encode(nfc, EncodeOptions{}); !slices.Equal(a, b) || !slices.Equal(a, []int{963}) {
		t.Errorf("qwen3 normalizes: %v %v", a, b)
	}
	if a := l.Encode(nfd, EncodeOptions{}); !slices.Equal(a, []int{68, 54939}) {
		t.Errorf("llama3 does not normalize: %v", a)
	}
	// With special tokens split, the spelling of a special token is text.
	if got := q.Encode("a<|endoftext|>b<think>", EncodeOptions{SplitSpecialTokens: true}); slices.Contains(got, 151643) || !slices.Contains(got, 151667) {
		t.Errorf("split special tokens: %v", got)
	}
}
