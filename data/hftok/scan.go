package hftok

import (
	"unicode"
	"unicode/utf8"
)

// The Split patterns gotrain reads, exactly as they appear in tokenizer.json
// once JSON-unescaped. Each alternation is ordered and backtracking (as in
// Oniguruma, the regex engine of Hugging Face's tokenizers), and every
// character starts a match of one alternative, so the matches tile the text
// and "Isolated" splitting keeps each match as one pre-token.
const (
	// PatternQwen2 is the pre-tokenizer pattern of Qwen2 and Qwen3: digits
	// one by one.
	PatternQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// PatternLlama3 is Llama 3's: digits in groups of up to three.
	PatternLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// PatternGPT2 is GPT-2's, which the ByteLevel pre-tokenizer applies
	// when its use_regex is true.
	PatternGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// scanner returns the end of the match that starts at i (every position
// starts one: see the patterns above), i < len(s).
type scanner func(s string, i int) int

// scannerFor returns the scanner of a known pattern.
func scannerFor(pattern string) (scanner, bool) {
	switch pattern {
	case PatternQwen2:
		return func(s string, i int) int { return scanLlamaStyle(s, i, 1) }, true
	case PatternLlama3:
		return func(s string, i int) int { return scanLlamaStyle(s, i, 3) }, true
	case PatternGPT2:
		return scanGPT2, true
	}
	return nil, false
}

// class is what the patterns ask of a character: \p{L}, \p{N}, \s, or none
// of these.
type class uint8

const (
	other class = iota
	letter
	number
	space
	// none is the class past the end of the text.
	none class = 255
)

// classOf classifies r: \p{L} is the general category L*, \p{N} is N*, and
// \s is Unicode's White_Space property (Oniguruma's \s in UTF-8, and Go's
// unicode.IsSpace).
func classOf(r rune) class {
	if r < utf8.RuneSelf {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
			return letter
		case '0' <= r && r <= '9':
			return number
		case r == ' ', '\t' <= r && r <= '\r':
			return space
		}
		return other
	}
	switch {
	case unicode.IsLetter(r):
		return letter
	case unicode.IsNumber(r):
		return number
	case unicode.IsSpace(r):
		return space
	}
	return other
}

// at decodes the character at i. A byte that does not start valid UTF-8 is
// one character of class other: a regex engine never sees such bytes (the
// library takes valid UTF-8 only), and keeping them whole lets byte-level
// BPE encode them losslessly.
func at(s string, i int) (rune, int, class) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1, classOf(rune(c))
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && w == 1 {
		return r, 1, other
	}
	return r, w, classOf(r)
}

// classAt is the class and width of the character at i, or none at the
// end of s.
func classAt(s string, i int) (class, int) {
	if i >= len(s) {
		return none, 0
	}
	_, w, c := at(s, i)
	return c, w
}

// run returns the end of the run of class c that starts at i.
func run(s string, i int, c class) int {
	for i < len(s) {
		cc, w := classAt(s, i)
		if cc != c {
			break
		}
		i += w
	}
	return i
}

// newlines returns the end of the run of '\r' and '\n' that starts at i.
func newlines(s string, i int) int {
	for i < len(s) && (s[i] == '\r' || s[i] == '\n') {
		i++
	}
	return i
}

// contraction returns the length of 's, 't, 're, 've, 'm, 'll or 'd after
// the apostrophe at i-1 (0 if none). foldCase makes the letters match in
// either case, and 's also match ſ (U+017F LATIN SMALL LETTER LONG S), whose
// Unicode case folding is s: Oniguruma and Rust's regex, which Hugging
// Face's tokenizers use, fold it; JavaScript's and .NET's engines do not.
func contraction(s string, i int, foldCase bool) int {
	lower := func(c byte) byte {
		if foldCase && 'A' <= c && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	if i >= len(s) {
		return 0
	}
	switch lower(s[i]) {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if i+1 < len(s) && lower(s[i+1]) == 'e' {
			return 2
		}
	case 'l':
		if i+1 < len(s) && lower(s[i+1]) == 'l' {
			return 2
		}
	case 0xC5: // ſ is C5 BF in UTF-8
		if foldCase && i+1 < len(s) && s[i+1] == 0xBF {
			return 2
		}
	}
	return 0
}

// spaceRun scans the whitespace run that starts at i (s[i] is whitespace):
// its end, the start of its last character, whether it holds more than one
// character, and the end of its last '\r' or '\n' (-1 if none).
func spaceRun(s string, i int) (end, last int, many bool, afterNL int) {
	afterNL = -1
	last = i
	n := 0
	for i < len(s) {
		c, w := classAt(s, i)
		if c != space {
			break
		}
		if s[i] == '\r' || s[i] == '\n' {
			afterNL = i + 1
		}
		last = i
		i += w
		n++
	}
	return i, last, n > 1, afterNL
}

// spaceTail matches the whitespace alternatives shared by all three
// patterns, \s+(?!\S)|\s+, at the whitespace character at i: the whole run
// when it ends the text, else the run less its last character (which is
// left to start the next word, " x"), else that one character.
func spaceTail(s string, i, end, last int, many bool) int {
	if end == len(s) {
		return end
	}
	if many {
		return last
	}
	_, w, _ := at(s, i)
	return i + w
}

// scanLlamaStyle matches PatternQwen2 (maxDigits 1) or PatternLlama3
// (maxDigits 3) at i, trying the alternatives in the pattern's order.
func scanLlamaStyle(s string, i int, maxDigits int) int {
	r, w, c := at(s, i)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r == '\'' {
		if n := contraction(s, i+1, true); n > 0 {
			return i + 1 + n
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c == letter {
		return run(s, i+w, letter)
	}
	if c != number && r != '\r' && r != '\n' {
		if c2, w2 := classAt(s, i+w); c2 == letter {
			return run(s, i+w+w2, letter)
		}
	}
	// \p{N} or \p{N}{1,3}
	if c == number {
		j := i + w
		for k := 1; k < maxDigits; k++ {
			c2, w2 := classAt(s, j)
			if c2 != number {
				break
			}
			j += w2
		}
		return j
	}
	// ` ?[^\s\p{L}\p{N}]+[\r\n]*`
	if r == ' ' {
		if c2, _ := classAt(s, i+1); c2 == other {
			return newlines(s, run(s, i+1, other))
		}
	}
	if c == other {
		return newlines(s, run(s, i, other))
	}
	// c is space. \s*[\r\n]+ backtracks to the run's last newline.
	end, last, many, afterNL := spaceRun(s, i)
	if afterNL >= 0 {
		return afterNL
	}
	return spaceTail(s, i, end, last, many)
}

// scanGPT2 matches PatternGPT2 at i.
func scanGPT2(s string, i int) int {
	r, w, c := at(s, i)
	if r == '\'' {
		if n := contraction(s, i+1, false); n > 0 {
			return i + 1 + n
		}
	}
	// ` ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+`
	if c != space {
		return run(s, i+w, c)
	}
	if r == ' ' {
		if c2, w2 := classAt(s, i+1); c2 == letter || c2 == number || c2 == other {
			return run(s, i+1+w2, c2)
		}
	}
	end, last, many, _ := spaceRun(s, i)
	return spaceTail(s, i, end, last, many)
}
