package data

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/gotrain/gotrain/internal/regularfile"
)

// readChunkBytes is how much of a shard body is read per call; a multiple of
// both token widths.
const readChunkBytes = 1 << 16

// ReadShardHeader validates the header of the shard at path and that the file
// size is exactly what the header promises, without reading the tokens.
func ReadShardHeader(path string) (ShardHeader, error) {
	f, st, err := openShard(path)
	if err != nil {
		return ShardHeader{}, err
	}
	defer f.Close()
	return readShardHeaderFile(path, f, st)
}

// openShard opens a shard file, refusing directories (with the glob that
// was probably meant) and every other kind of non-regular file.
func openShard(path string) (*os.File, os.FileInfo, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return nil, nil, shardErr(path, "is a directory; give shard files or a glob such as %s", filepath.Join(path, "train_*.bin"))
	}
	return regularfile.Open("token shard", path)
}

func readShardHeaderFile(path string, f *os.File, st os.FileInfo) (ShardHeader, error) {
	hdr := make([]byte, ShardHeaderBytes)
	n, err := io.ReadFull(f, hdr)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return ShardHeader{}, fmt.Errorf("token shard %s: read header: %w", path, err)
	}
	h, err := parseShardHeader(path, hdr[:n])
	if err != nil {
		return ShardHeader{}, err
	}
	if err := checkShardSize(path, h, st.Size()); err != nil {
		return ShardHeader{}, err
	}
	return h, nil
}

// ReadShard reads the whole shard at path. Tokens are returned as int32
// whatever their stored width; the slice is owned by the caller.
func ReadShard(path string) (ShardHeader, []int32, error) {
	f, st, err := openShard(path)
	if err != nil {
		return ShardHeader{}, nil, err
	}
	defer f.Close()
	h, err := readShardHeaderFile(path, f, st)
	if err != nil {
		return ShardHeader{}, nil, err
	}
	// The size check above makes the header's count trustworthy enough to
	// allocate exactly.
	toks, err := readShardBody(path, f, h, h.NumTokens)
	return h, toks, err
}

// ReadShardFrom reads a shard from a stream; name is used in errors. It never
// trusts the header's token count for allocation: memory grows only with the
// bytes actually present, so any input is safe to feed it.
func ReadShardFrom(name string, r io.Reader) (ShardHeader, []int32, error) {
	hdr := make([]byte, ShardHeaderBytes)
	n, err := io.ReadFull(r, hdr)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return ShardHeader{}, nil, fmt.Errorf("token shard %s: read header: %w", name, err)
	}
	h, err := parseShardHeader(name, hdr[:n])
	if err != nil {
		return ShardHeader{}, nil, err
	}
	toks, err := readShardBody(name, r, h, min(h.NumTokens, 1<<14))
	return h, toks, err
}

// readShardBody reads h.NumTokens tokens after the header and then checks that
// nothing follows them.
func readShardBody(name string, r io.Reader, h ShardHeader, capHint int64) ([]int32, error) {
	w := int64(h.Format.TokenBytes())
	want := h.NumTokens * w
	toks := make([]int32, 0, capHint)
	buf := make([]byte, readChunkBytes)
	var got int64
	for got < want {
		chunk := buf[:min(int64(len(buf)), want-got)]
		n, err := io.ReadFull(r, chunk)
		got += int64(n)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, shardErr(name, "truncated: header says %d tokens, so expected %d bytes, found %d",
					h.NumTokens, h.FileBytes(), ShardHeaderBytes+got)
			}
			return nil, fmt.Errorf("token shard %s: read tokens: %w", name, err)
		}
		var err2 error
		toks, err2 = appendTokens(name, toks, chunk, h.Format)
		if err2 != nil {
			return nil, err2
		}
	}
	extra, err := io.Copy(io.Discard, r)
	if err != nil {
		return nil, fmt.Errorf("token shard %s: read past tokens: %w", name, err)
	}
	if extra > 0 {
		return nil, shardErr(name, "trailing bytes: header says %d tokens (%d bytes), file has %d bytes (%d extra)",
			h.NumTokens, h.FileBytes(), h.FileBytes()+extra, extra)
	}
	return toks, nil
}

// appendTokens decodes little-endian tokens from b (a whole number of them).
func appendTokens(name string, dst []int32, b []byte, f ShardFormat) ([]int32, error) {
	if f.TokenBytes() == 2 {
		for i := 0; i+1 < len(b); i += 2 {
			dst = append(dst, int32(binary.LittleEndian.Uint16(b[i:])))
		}
		return dst, nil
	}
	for i := 0; i+3 < len(b); i += 4 {
		v := binary.LittleEndian.Uint32(b[i:])
		if v > math.MaxInt32 {
			return nil, shardErr(name, "token %d at index %d does not fit int32", v, len(dst))
		}
		dst = append(dst, int32(v))
	}
	return dst, nil
}
