package hftok

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// naiveBPE is the textbook algorithm on strings: merge the adjacent pair of
// lowest rank, the leftmost among equals, until no pair has a rank.
func naiveBPE(word string, rank map[[2]string]int) []string {
	syms := make([]string, len(word))
	for i := 0; i < len(word); i++ { // bytes, not runes (the fuzzer caught a range over runes)
		syms[i] = word[i : i+1]
	}
	for {
		best, at := -1, -1
		for i := 0; i+1 < len(syms); i++ {
			if r, ok := rank[[2]string{syms[i], syms[i+1]}]; ok && (best < 0 || r < best) {
				best, at = r, i
			}
		}
		if at < 0 {
			return syms
		}
		syms = slices.Replace(syms, at, at+2, syms[at]+syms[at+1])
	}
}

// randomMerges trains nothing but behaves like a trained merge list: every
// merge joins two existing symbols into a symbol nothing made before.
func randomMerges(r *rand.Rand, alphabet string, n int) [][2]string {
	syms := strings.Split(alphabet, "")
	exists := map[string]bool{}
	for _, c := range syms {
		exists[c] = true
	}
	var merges [][2]string
	for len(merges) < n {
		a, b := syms[r.IntN(len(syms))], syms[r.IntN(len(syms))]
		if exists[a+b] || len(a+b) > 6 {
			continue
		}
		exists[a+b] = true
		merges = append(merges, [2]string{a, b})
		syms = append(syms, a+b)
	}
	return merges
}

func TestBPEMatchesTextbookMerging(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const alphabet = "abcde"
	for trial := range 20 {
		merges := randomMerges(r, alphabet, 40)
		rank := map[[2]string]int{}
		for i, m := range merges {
			rank[m] = i
		}
		s := synth{merges: merges, mergeStrings: trial%2 == 0,
			preTokenizer: map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}}
		tok := s.load(t)
		for range 50 {
			b := make([]byte, 1+r.IntN(30))
			for i := range b {
				b[i] = alphabet[r.IntN(len(alphabet))]
			}
			word := string(b)
			var want []int
			for _, p := range naiveBPE(word, rank) {
				id, ok := tok.TokenID(byteLevel(p))
				if !ok {
					t.Fatalf("piece %q has no id", p)
				}
				want = append(want, id)
			}
			// Twice: the second answer comes from the cache.
			for range 2 {
				if got := tok.Encode(word, EncodeOptions{}); !slices.Equal(got, want) {
					t.Fatalf("trial %d %q: got %v, want %v (%q)", trial, word, got, want, naiveBPE(word, rank))
				}
			}
		}
	}
}

// A pre-token longer than the cache takes is merged every time, and a long
// run of one letter (one pre-token) stays fast: the heap makes merging
// O(n log n), where rescanning for the best pair would be O(n²).
func TestBPELongWord(t *testing.T) {
	tok := synth{merges: [][2]string{{"a", "a"}, {"aa", "aa"}, {"aaaa", "aaaa"}}}.load(t)
	word := strings.Repeat("a", 1<<20+3)
	ids := tok.Encode(word, EncodeOptions{})
	aaaa8, _ := tok.TokenID("aaaaaaaa")
	aa, _ := tok.TokenID("aa")
	a, _ := tok.TokenID("a")
	if len(ids) != 1<<17+2 || ids[0] != aaaa8 || ids[len(ids)-2] != aa || ids[len(ids)-1] != a {
		t.Fatalf("%d ids, last %v", len(ids), ids[len(ids)-3:])
	}
	if got := string(tok.DecodeBytes(ids, false)); got != word {
		t.Fatal("round trip of the long word failed")
	}
}

// ignore_merges (Llama 3): a pre-token that is itself a vocabulary entry is
// that one id even when the merges would not build it.
func TestBPEIgnoreMerges(t *testing.T) {
	s := synth{merges: [][2]string{{"a", "b"}, {"b", "c"}}, extraVocab: []string{"abc"}}
	tok := s.load(t)
	ab, _ := tok.TokenID("ab")
	c, _ := tok.TokenID("c")
	abc, _ := tok.TokenID("abc")
	if got := tok.Encode("abc", EncodeOptions{}); !slices.Equal(got, []int{ab, c}) {
		t.Fatalf("abc = %v, want [ab c]", got)
	}
	s.modelExtra = map[string]any{"ignore_merges": true}
	if got := s.load(t).Encode("abc", EncodeOptions{}); !slices.Equal(got, []int{abc}) {
		t.Fatalf("with ignore_merges abc = %v, want [abc]", got)
	}
}

// A byte missing from the vocabulary becomes unk_token, consecutive ones
// fused with fuse_unk, or is dropped without an unk_token (tokenizers' BPE).
func TestBPEUnknownBytes(t *testing.T) {
	vocab := map[string]int{"a": 0, "b": 1, "<unk>": 2}
	mk := func(unk any, fuse bool) *Tokenizer {
		doc := `{"model":{"type":"BPE","vocab":` + mustJSON(t, vocab) + `,"merges":[],"unk_token":` + mustJSON(t, unk) +
			`,"fuse_unk":` + mustJSON(t, fuse) + `},"pre_tokenizer":{"type":"ByteLevel","use_regex":false},"decoder":{"type":"ByteLevel"}}`
		tok, err := Load([]byte(doc), Config{})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	if got := mk("<unk>", false).Encode("axyb", EncodeOptions{}); !slices.Equal(got, []int{0, 2, 2, 1}) {
		t.Errorf("unk: %v", got)
	}
	if got := mk("<unk>", true).Encode("axyb", EncodeOptions{}); !slices.Equal(got, []int{0, 2, 1}) {
		t.Errorf("fuse_unk: %v", got)
	}
	if got := mk(nil, false).Encode("axyb", EncodeOptions{}); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("no unk: %v", got)
	}
}
