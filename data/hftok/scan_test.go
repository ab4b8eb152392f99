package hftok

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// splitWith tiles s with a scanner.
func splitWith(scan scanner, s string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := scan(s, i)
		if j <= i || j > len(s) {
			panic("scanner did not advance")
		}
		out = append(out, s[i:j])
		i = j
	}
	return out
}

// regexSplit is the reference: a backtracking engine (regexp2, .NET
// semantics, which has lookahead) running the pattern as written, keeping
// matches and the text between them ("Isolated").
func regexSplit(t testing.TB, pattern, s string) []string {
	t.Helper()
	re := regexp2.MustCompile(pattern, regexp2.Unicode)
	var out []string
	prev := 0
	runes := []rune(s)
	m, err := re.FindStringMatch(s)
	for ; err == nil && m != nil; m, err = re.FindNextMatch(m) {
		// regexp2 reports rune offsets.
		start := len(string(runes[:m.Index]))
		if prev < start {
			out = append(out, s[prev:start])
		}
		out = append(out, m.String())
		prev = start + len(m.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	if prev < len(s) {
		out = append(out, s[prev:])
	}
	return out
}

var patterns = []struct {
	name, pattern string
	scan          scanner
}{
	{"qwen2", PatternQwen2, func(s string, i int) int { return scanLlamaStyle(s, i, 1) }},
	{"llama3", PatternLlama3, func(s string, i int) int { return scanLlamaStyle(s, i, 3) }},
	{"gpt2", PatternGPT2, scanGPT2},
}

// hostile holds the cases where the alternatives compete: whitespace runs
// before words, digits and punctuation, newlines inside runs, contractions
// in both cases, and characters outside ASCII in every class.
var hostile = []string{
	"", " ", "  ", "   x", " x", "\tx", "\t\tx", "\n", "\n\n", " \n ", "a \n b", "   \n\n   x", "x   ", "x \t ",
	" 2023", "12345", "x=1234567;y=89", " !", "  !!", "!!\n\n", " !\r\n", "a\r\n\r\nb", " \r", "\r\n \t",
	"I'm you'll they'VE WE'D", "'s'S'ss 're'RE'rE 'll'LL'lL 'Ll 'm'M 'd'D 't'T 've", "' 's", "''s", "don’t",
	"rock'n'roll 'twas", "'", "'x", "x'", "'123", "' ", "a'\nb",
	"中文测试，你好世界", "emoji 🤗🦙 ok", "👨‍👩‍👧 👍🏽", "e\u0301 é", "\u00a0x\u3000y\u2028z\u2009", "x\u00a0\u00a0y",
	"½²③Ⅻ٣٤٥", "a1b2", "\x01\x02 \x7f", "ab\u200dcd", "x\u000by\u000cz", "<|im_start|>user",
	"def f(x):\n    return x**2\n", "    if x:\n        pass\n\n\n",
}

func TestScannersMatchBacktrackingRegex(t *testing.T) {
	for _, p := range patterns {
		for _, s := range hostile {
			if got, want := splitWith(p.scan, s), regexSplit(t, p.pattern, s); !slices.Equal(got, want) {
				t.Errorf("%s %q:\n got %s\nwant %s", p.name, s, quoteAll(got), quoteAll(want))
			}
		}
	}
}

// Random strings over an alphabet where every class and every boundary the
// patterns care about is frequent.
func TestScannersMatchBacktrackingRegexRandom(t *testing.T) {
	alphabet := []string{"a", "Z", "é", "中", "1", "٣", "½", " ", "  ", "\t", "\n", "\r", "\u00a0", "\u3000",
		"'", "s", "S", "re", "LL", "!", ",", "🤗", "\u0301", "_", "-", "\x01"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		var sb strings.Builder
		for range r.IntN(24) {
			sb.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		s := sb.String()
		for _, p := range patterns {
			if got, want := splitWith(p.scan, s), regexSplit(t, p.pattern, s); !slices.Equal(got, want) {
				t.Fatalf("%s %q:\n got %s\nwant %s", p.name, s, quoteAll(got), quoteAll(want))
			}
		}
	}
}

// Published splits (hf-models-and-tokenizers §5.2): a lone space before
// digits is its own piece; Llama 3 groups digits by three from the left.
func TestScannerDigitGroups(t *testing.T) {
	llama := patterns[1].scan
	if got := splitWith(llama, " 2023"); !slices.Equal(got, []string{" ", "202", "3"}) {
		t.Errorf("llama3 %q", got)
	}
	qwen := patterns[0].scan
	if got := splitWith(qwen, " 2023"); !slices.Equal(got, []string{" ", "2", "0", "2", "3"}) {
		t.Errorf("qwen2 %q", got)
	}
}

// Where Oniguruma (and Rust's regex) differ from regexp2: case-insensitive
// 's also matches ſ (U+017F), whose case folding is s. A byte that is not
// UTF-8 is a character of its own of no class, kept whole.
func TestScannerFoldsLongSAndKeepsInvalidBytes(t *testing.T) {
	qwen := patterns[0].scan
	if got := splitWith(qwen, "it'ſ"); !slices.Equal(got, []string{"it", "'ſ"}) {
		t.Errorf("long s: %q", got)
	}
	if got := splitWith(scanGPT2, "it'ſ"); !slices.Equal(got, []string{"it", "'", "ſ"}) {
		t.Errorf("gpt2 is case-sensitive: %q", got)
	}
	if got := splitWith(qwen, "a\xffb \xfe\xfd c"); !slices.Equal(got, []string{"a", "\xffb", " \xfe\xfd", " c"}) {
		t.Errorf("invalid bytes: %q", got)
	}
}

// FuzzPreTokenize checks the three scanners against the backtracking regex
// on any valid UTF-8 (the regex engine sees runes only) without ſ.
func FuzzPreTokenize(f *testing.F) {
	for _, s := range hostile {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 200 {
			return
		}
		for _, p := range patterns {
			got := splitWith(p.scan, s)
			if strings.Join(got, "") != s {
				t.Fatalf("%s: pieces %q do not tile %q", p.name, got, s)
			}
			if !utf8.ValidString(s) || strings.ContainsRune(s, 'ſ') {
				continue
			}
			if want := regexSplit(t, p.pattern, s); !slices.Equal(got, want) {
				t.Fatalf("%s %q:\n got %s\nwant %s", p.name, s, quoteAll(got), quoteAll(want))
			}
		}
	})
}
