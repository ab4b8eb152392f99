package launch

import (
	"bytes"
	"io"
	"sync"
)

// SharedOutput serialises writes of whole lines from many ranks to one
// destination. It is safe for concurrent use.
type SharedOutput struct {
	mu sync.Mutex
	w  io.Writer
}

// NewSharedOutput wraps w.
func NewSharedOutput(w io.Writer) *SharedOutput { return &SharedOutput{w: w} }

// Write writes p in one call under the lock.
func (s *SharedOutput) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// Prefixed returns a writer that emits each complete line as prefix+line in
// one Write, so lines of different ranks never mix mid-line. A LineWriter
// is for one goroutine (one child's output pipe).
func (s *SharedOutput) Prefixed(prefix string) *LineWriter {
	return &LineWriter{out: s, prefix: []byte(prefix)}
}

// maxLine is where an unterminated line is cut and emitted anyway, so output
// without newlines (a progress bar redrawn with '\r') cannot grow without bound.
const maxLine = 64 << 10

// LineWriter buffers a partial line until its '\n' arrives.
type LineWriter struct {
	out    *SharedOutput
	prefix []byte
	buf    []byte
}

// Write emits every complete line in p and keeps the rest.
func (l *LineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 && len(l.buf) < maxLine {
			break
		}
		end := i + 1
		if i < 0 {
			end = maxLine
		}
		if err := l.emit(l.buf[:end], i < 0); err != nil {
			return len(p), err
		}
		l.buf = l.buf[end:]
	}
	if len(l.buf) == 0 {
		l.buf = nil
	}
	return len(p), nil
}

// Flush emits a final line that had no '\n', adding one.
func (l *LineWriter) Flush() error {
	if len(l.buf) == 0 {
		return nil
	}
	err := l.emit(l.buf, true)
	l.buf = nil
	return err
}

func (l *LineWriter) emit(line []byte, addNewline bool) error {
	msg := make([]byte, 0, len(l.prefix)+len(line)+1)
	msg = append(msg, l.prefix...)
	msg = append(msg, line...)
	if addNewline {
		msg = append(msg, '\n')
	}
	_, err := l.out.Write(msg)
	return err
}
