package hftok

import (
	"unicode"
	"unicode/utf8"
)

// AddedToken is a token of tokenizer.json's added_tokens: special tokens
// such as <|im_start|> and others such as Qwen3's <think>. They are found in
// the text before anything else and become their id.
type AddedToken struct {
	ID      int
	Content string
	// SingleWord matches only where neither neighbour is a word character
	// (\w). LStrip and RStrip take the whitespace on that side into the
	// token. Normalized tokens are matched in the normalized text, the
	// others in the raw text. Special tokens are dropped by a decode that
	// skips them, and left as text when the caller splits special tokens.
	SingleWord, LStrip, RStrip, Normalized, Special bool
}

// segment is a piece of the text: an added token (id ≥ 0) or text to
// normalize and tokenize (id -1).
type segment struct {
	text string
	id   int32
}

// addedMatcher finds added tokens in text: leftmost first, and the longest
// of those that start there (the Aho-Corasick LeftmostLongest search of
// tokenizers' added_vocabulary.rs), with a byte trie.
type addedMatcher struct {
	tokens []AddedToken
	first  [256]bool // bytes that start some token
	// edges maps node<<8|byte to the child node; one map for the whole
	// trie keeps a hostile file's many long tokens to ~20 bytes an edge.
	edges map[uint64]int32
	// ends[node] is the index into tokens of the token ending at node, -1
	// if none.
	ends []int32
}

func newAddedMatcher(tokens []AddedToken) *addedMatcher {
	m := &addedMatcher{tokens: tokens, edges: map[uint64]int32{}, ends: []int32{-1}}
	for ti, t := range tokens {
		n := int32(0)
		for i := 0; i < len(t.Content); i++ {
			k := uint64(n)<<8 | uint64(t.Content[i])
			nx, ok := m.edges[k]
			if !ok {
				nx = int32(len(m.ends))
				m.ends = append(m.ends, -1)
				m.edges[k] = nx
			}
			n = nx
		}
		m.ends[n] = int32(ti)
		m.first[t.Content[0]] = true
	}
	return m
}

// find returns the leftmost-longest token match at or after pos.
func (m *addedMatcher) find(s string, pos int) (start, stop int, token int32, ok bool) {
	for i := pos; i < len(s); i++ {
		if !m.first[s[i]] {
			continue
		}
		n, best, end := int32(0), int32(-1), 0
		for j := i; j < len(s); j++ {
			nx, ok := m.edges[uint64(n)<<8|uint64(s[j])]
			if !ok {
				break
			}
			n = nx
			if t := m.ends[n]; t >= 0 {
				best, end = t, j+1
			}
		}
		if best >= 0 {
			return i, end, best, true
		}
	}
	return 0, 0, 0, false
}

// split cuts s into added tokens and the text between them, appending to
// out, as tokenizers' AddedVocabulary::find_matches: a match that a rule
// rejects (single_word, or a special token while special tokens are split)
// is skipped whole, since the search resumes after it. One divergence: a
// match that starts inside whitespace an rstrip token already took is
// skipped, where tokenizers would return overlapping pieces.
func (m *addedMatcher) split(s string, splitSpecial bool, out []segment) []segment {
	if m == nil || len(m.tokens) == 0 {
		return append(out, segment{s, -1})
	}
	done := 0 // end of what out covers
	for pos := 0; ; {
		start, stop, ti, ok := m.find(s, pos)
		if !ok {
			break
		}
		pos = stop
		t := &m.tokens[ti]
		if splitSpecial && t.Special {
			continue
		}
		if t.SingleWord && (endsWithWord(s[:start]) || startsWithWord(s[stop:])) {
			continue
		}
		if t.LStrip {
			start = max(trimSpaceRight(s[:start]), done)
		}
		if start < done {
			continue
		}
		if t.RStrip {
			stop += leadingSpace(s[stop:])
		}
		if done < start {
			out = append(out, segment{s[done:start], -1})
		}
		out = append(out, segment{s[start:stop], int32(t.ID)})
		done = stop
	}
	if done < len(s) {
		out = append(out, segment{s[done:], -1})
	}
	return out
}

// isWord is Rust regex's Unicode \w: Alphabetic, marks, decimal digits,
// connector punctuation and the joiners.
func isWord(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) || unicode.Is(unicode.Nl, r) ||
		unicode.Is(unicode.Pc, r) || unicode.Is(unicode.Other_Alphabetic, r) || unicode.Is(unicode.Join_Control, r)
}

func endsWithWord(s string) bool {
	r, w := utf8.DecodeLastRuneInString(s)
	return w > 0 && !(r == utf8.RuneError && w == 1) && isWord(r)
}

func startsWithWord(s string) bool {
	r, w := utf8.DecodeRuneInString(s)
	return w > 0 && !(r == utf8.RuneError && w == 1) && isWord(r)
}

// trimSpaceRight is the length of s without its trailing whitespace.
func trimSpaceRight(s string) int {
	for len(s) > 0 {
		r, w := utf8.DecodeLastRuneInString(s)
		if !unicode.IsSpace(r) {
			break
		}
		s = s[:len(s)-w]
	}
	return len(s)
}

// leadingSpace is the length of s's leading whitespace.
func leadingSpace(s string) int {
	n := 0
	for n < len(s) {
		r, w := utf8.DecodeRuneInString(s[n:])
		if !unicode.IsSpace(r) {
			break
		}
		n += w
	}
	return n
}
