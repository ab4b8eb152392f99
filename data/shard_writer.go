package data

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// ShardWriter streams tokens into a new shard. The data goes to a temporary
// file beside the destination; Close writes the header, syncs and renames it
// into place, so a reader never sees a half-written shard under the final
// name. A ShardWriter is not safe for concurrent use.
type ShardWriter struct {
	path   string
	tmp    *os.File
	bw     *bufio.Writer
	format ShardFormat
	ntok   int64
	maxTok int64 // largest id written, recorded in the header
	enc    []byte
	done   bool
}

// CreateShard starts a shard that Close will publish at path.
func CreateShard(path string, format ShardFormat) (*ShardWriter, error) {
	if format != ShardGPT2 && format != ShardLlama3 {
		return nil, fmt.Errorf("create token shard %s: unknown format %d", path, format)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, fmt.Errorf("create token shard %s: %w", path, err)
	}
	w := &ShardWriter{
		path:   path,
		tmp:    tmp,
		bw:     bufio.NewWriterSize(tmp, 1<<20),
		format: format,
		enc:    make([]byte, readChunkBytes),
	}
	// Placeholder header; the real one needs the final count.
	if _, err := w.bw.Write(make([]byte, ShardHeaderBytes)); err != nil {
		w.Abort()
		return nil, fmt.Errorf("create token shard %s: %w", path, err)
	}
	return w, nil
}

// Path is where Close publishes the shard.
func (w *ShardWriter) Path() string { return w.path }

// Len is the number of tokens written so far.
func (w *ShardWriter) Len() int64 { return w.ntok }

// Write appends tokens. A token outside [0, format.MaxToken()] or a shard
// growing past the int32 count of the header is an error, and nothing of that
// call is written.
func (w *ShardWriter) Write(tokens []int32) error {
	if w.done {
		return fmt.Errorf("token shard %s: write after Close or Abort", w.path)
	}
	limit := w.format.MaxToken()
	largest := w.maxTok
	for i, t := range tokens {
		if t < 0 || int64(t) > limit {
			return fmt.Errorf("token shard %s: token id %d at index %d does not fit the %s format (ids must be in [0, %d])",
				w.path, t, w.ntok+int64(i), w.format, limit)
		}
		largest = max(largest, int64(t))
	}
	if w.ntok+int64(len(tokens)) > math.MaxInt32 {
		return fmt.Errorf("token shard %s: more than %d tokens do not fit the int32 count of the header", w.path, math.MaxInt32)
	}
	// Recorded before writing: should a write fail half-way, the header
	// can only overstate the largest id, which makes a loader scan the
	// tokens, never understate it, which would let a bad id through.
	w.maxTok = largest
	tb := w.format.TokenBytes()
	per := len(w.enc) / tb
	for len(tokens) > 0 {
		n := min(per, len(tokens))
		b := w.enc[:n*tb]
		if tb == 2 {
			for i, t := range tokens[:n] {
				binary.LittleEndian.PutUint16(b[2*i:], uint16(t))
			}
		} else {
			for i, t := range tokens[:n] {
				binary.LittleEndian.PutUint32(b[4*i:], uint32(t))
			}
		}
		if _, err := w.bw.Write(b); err != nil {
			return fmt.Errorf("write token shard %s: %w", w.path, err)
		}
		w.ntok += int64(n)
		tokens = tokens[n:]
	}
	return nil
}

// Close finishes the shard and publishes it. A shard with no tokens is not
// published (readers reject it) and Close says so. On any error the temporary
// file is removed.
func (w *ShardWriter) Close() error {
	if w.done {
		return fmt.Errorf("token shard %s: Close after Close or Abort", w.path)
	}
	if w.ntok == 0 {
		w.Abort()
		return fmt.Errorf("token shard %s: no tokens written", w.path)
	}
	err := w.bw.Flush()
	if err == nil {
		hdr := make([]byte, ShardHeaderBytes)
		encodeShardHeader(hdr, w.format, w.ntok, w.maxTok)
		_, err = w.tmp.WriteAt(hdr, 0)
	}
	if err == nil {
		err = w.tmp.Chmod(0o644)
	}
	if err == nil {
		err = w.tmp.Sync()
	}
	if err != nil {
		w.Abort()
		return fmt.Errorf("write token shard %s: %w", w.path, err)
	}
	w.done = true
	tmpName := w.tmp.Name()
	if err := w.tmp.Close(); err != nil {
		os.Remove(tmpName)
		return fmt.Errorf("write token shard %s: %w", w.path, err)
	}
	if err := os.Rename(tmpName, w.path); err != nil {
		os.Remove(tmpName)
		return fmt.Errorf("publish token shard %s: %w", w.path, err)
	}
	syncDir(filepath.Dir(w.path))
	return nil
}

// Abort discards the shard. It is safe to call after Close (it does nothing).
func (w *ShardWriter) Abort() {
	if w.done {
		return
	}
	w.done = true
	name := w.tmp.Name()
	w.tmp.Close()
	os.Remove(name)
}

// WriteShard writes tokens as one shard at path, atomically.
func WriteShard(path string, format ShardFormat, tokens []int32) error {
	w, err := CreateShard(path, format)
	if err != nil {
		return err
	}
	if err := w.Write(tokens); err != nil {
		w.Abort()
		return err
	}
	return w.Close()
}

// syncDir makes a rename durable. Failure is ignored: some filesystems cannot
// sync a directory, and the shard itself is already synced.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	d.Close()
}
