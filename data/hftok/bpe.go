package hftok

import (
	"hash/maphash"
	"sync"
)

// merge is what a pair of adjacent symbols becomes: its rank (the merge's
// index in the merges list; lower merges first) and the id of the result.
type merge struct{ rank, id int32 }

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// bpe is byte-level BPE over raw bytes: the vocabulary's byte-level strings
// were mapped back to bytes when the file was loaded, so a pre-token is
// merged without ever being spelled in byte-level characters.
type bpe struct {
	byteID [256]int32       // id of each single byte, -1 if the vocabulary lacks it
	merges map[uint64]merge // by pairKey of the two ids
	// whole maps raw-byte strings to ids for ignore_merges (Llama 3): a
	// pre-token that is itself a vocabulary entry is that one id.
	whole   map[string]int32
	unk     int32 // -1: a byte missing from the vocabulary is dropped
	fuseUnk bool
	cache   *wordCache
}

// symbol is one piece of a word during merging, linked to its neighbours;
// a symbol merged into its left neighbour has gone set.
type symbol struct {
	id         int32
	prev, next int32
	gone       bool
}

// candidate is a possible merge of the symbol at pos with its next.
type candidate struct {
	rank, pos, id int32
}

// candidates is a min-heap by rank, then by position: the lowest-ranked
// merge goes first, the leftmost among equals (tokenizers' word.rs). It is
// typed rather than container/heap's, whose interface boxes every push.
type candidates []candidate

func (h candidates) less(i, j int) bool {
	if h[i].rank != h[j].rank {
		return h[i].rank < h[j].rank
	}
	return h[i].pos < h[j].pos
}

func (h *candidates) push(c candidate) {
	*h = append(*h, c)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *candidates) pop() candidate {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q = q[:n]
	for i := 0; ; {
		l, small := 2*i+1, i
		if l < n && q.less(l, small) {
			small = l
		}
		if r := l + 1; r < n && q.less(r, small) {
			small = r
		}
		if small == i {
			break
		}
		q[i], q[small] = q[small], q[i]
		i = small
	}
	*h = q
	return top
}

// scratch holds one Encode call's buffers.
type scratch struct {
	syms   []symbol
	heap   candidates
	word   []int32
	pieces [2][]string
}

// appendWord appends the ids of one pre-token (raw bytes) to out.
func (m *bpe) appendWord(out []int, word string, sc *scratch) []int {
	if m.whole != nil {
		if id, ok := m.whole[word]; ok {
			return append(out, int(id))
		}
	}
	if ids, ok := m.cache.get(word); ok {
		for _, id := range ids {
			out = append(out, int(id))
		}
		return out
	}
	ids := m.mergeWord(word, sc)
	m.cache.put(word, ids)
	for _, id := range ids {
		out = append(out, int(id))
	}
	return out
}

// mergeWord runs BPE on one word exactly as tokenizers' Word::merge_all:
// candidates come off a heap by (rank, position); one whose symbols have
// changed since it was pushed is skipped, detected, as there, by the pair at
// its position no longer producing the same id. The result is in sc.word.
func (m *bpe) mergeWord(word string, sc *scratch) []int32 {
	syms := sc.syms[:0]
	pendingUnk := false
	for i := 0; i < len(word); i++ {
		id := m.byteID[word[i]]
		if id < 0 {
			if m.unk < 0 {
				continue
			}
			if pendingUnk && m.fuseUnk {
				continue
			}
			id, pendingUnk = m.unk, true
		} else {
			pendingUnk = false
		}
		syms = append(syms, symbol{id: id, prev: int32(len(syms)) - 1, next: int32(len(syms)) + 1})
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	h := sc.heap[:0]
	for i := 0; i+1 < len(syms); i++ {
		if mg, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			h.push(candidate{rank: mg.rank, pos: int32(i), id: mg.id})
		}
	}
	for len(h) > 0 {
		top := h.pop()
		cur := &syms[top.pos]
		if cur.gone || cur.next < 0 {
			continue
		}
		right := syms[cur.next]
		if mg, ok := m.merges[pairKey(cur.id, right.id)]; !ok || mg.id != top.id {
			continue
		}
		cur.id = top.id
		syms[cur.next].gone = true
		cur.next = right.next
		if right.next >= 0 {
			syms[right.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if mg, ok := m.merges[pairKey(syms[cur.prev].id, cur.id)]; ok {
				h.push(candidate{rank: mg.rank, pos: cur.prev, id: mg.id})
			}
		}
		if cur.next >= 0 {
			if mg, ok := m.merges[pairKey(cur.id, syms[cur.next].id)]; ok {
				h.push(candidate{rank: mg.rank, pos: top.pos, id: mg.id})
			}
		}
	}
	ids := sc.word[:0]
	for i := 0; i < len(syms); {
		ids = append(ids, syms[i].id)
		if syms[i].next < 0 {
			break
		}
		i = int(syms[i].next)
	}
	sc.syms, sc.heap, sc.word = syms, h, ids
	return ids
}

// wordCache remembers the ids of short pre-tokens, which repeat: most of a
// text's words have been seen before, and a map lookup is several times
// cheaper than merging. It is split into shards, each with its own lock, so
// concurrent encoders seldom wait on each other, and a full shard is
// emptied, which bounds its memory.
type wordCache struct {
	seed   maphash.Seed
	shards [cacheShards]cacheShard
}

const (
	cacheShards = 64
	// cacheShardWords bounds each shard (about 16 MB for all 64 with
	// words of a few bytes).
	cacheShardWords = 4096
	// cacheMaxWordBytes is the longest word cached, as tokenizers' cache.
	cacheMaxWordBytes = 256
)

type cacheShard struct {
	mu    sync.RWMutex
	words map[string][]int32
}

func newWordCache() *wordCache { return &wordCache{seed: maphash.MakeSeed()} }

func (c *wordCache) shard(word string) *cacheShard {
	return &c.shards[maphash.String(c.seed, word)%cacheShards]
}

func (c *wordCache) get(word string) ([]int32, bool) {
	if len(word) >= cacheMaxWordBytes {
		return nil, false
	}
	s := c.shard(word)
	s.mu.RLock()
	ids, ok := s.words[word]
	s.mu.RUnlock()
	return ids, ok
}

// put stores copies of word and ids: word is a slice of the caller's text,
// which must not be kept alive by the cache.
func (c *wordCache) put(word string, ids []int32) {
	if len(word) >= cacheMaxWordBytes {
		return
	}
	s := c.shard(word)
	key := string([]byte(word))
	val := append([]int32(nil), ids...)
	s.mu.Lock()
	if s.words == nil || len(s.words) >= cacheShardWords {
		s.words = make(map[string][]int32, cacheShardWords/4)
	}
	s.words[key] = val
	s.mu.Unlock()
}
