package checkpoint

import (
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// castagnoli is built per call rather than held in a package variable; the
// standard library caches the table, so this costs nothing after the first.
func castagnoli() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// streamChunk is the read buffer of checksumming: files are streamed, never
// held whole.
const streamChunk = 1 << 20

// truncatedError says a file ends inside a tensor.
type truncatedError struct {
	tensor     string
	begin, end int64 // absolute byte range the tensor needs
	size       int64 // the file's size
}

func (e *truncatedError) Error() string {
	return fmt.Sprintf("file is truncated: tensor %q needs bytes [%d, %d) but the file ends at %d", e.tensor, e.begin, e.end, e.size)
}

// span is one tensor's absolute byte range in a file.
type span struct {
	name       string
	begin, end int64
}

// crcSpans streams each span of f in order and returns its CRC-32C. A file
// that ends inside a span gives a *truncatedError naming that span.
func crcSpans(f *os.File, spans []span) ([]uint32, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	tab := castagnoli()
	buf := make([]byte, streamChunk)
	out := make([]uint32, len(spans))
	for i, s := range spans {
		if s.end > st.Size() {
			return nil, &truncatedError{tensor: s.name, begin: s.begin, end: s.end, size: st.Size()}
		}
		var crc uint32
		for off := s.begin; off < s.end; {
			n := int(min(int64(len(buf)), s.end-off))
			if _, err := f.ReadAt(buf[:n], off); err != nil {
				if err == io.EOF {
					return nil, &truncatedError{tensor: s.name, begin: s.begin, end: s.end, size: off}
				}
				return nil, fmt.Errorf("tensor %q: %w", s.name, err)
			}
			crc = crc32.Update(crc, tab, buf[:n])
			off += int64(n)
		}
		out[i] = crc
	}
	return out, nil
}
