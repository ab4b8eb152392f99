package launch

import (
	"bytes"
	"io"
	"os"
	"slices"
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

// maxTailLine bounds each line a tailWriter keeps; error messages are far
// shorter, and a runaway line must not hold memory.
const maxTailLine = 4 << 10

// tailWriter keeps the last lines a process wrote, for Blame and error
// messages. It is safe for concurrent use.
type tailWriter struct {
	mu    sync.Mutex
	max   int
	lines []string
	part  []byte
}

func newTailWriter(lines int) *tailWriter { return &tailWriter{max: lines} }

// wrap returns the writers to give a process so that t sees its standard
// error (and its standard output too when both go to the same writer,
// which must then stay one writer: a LineWriter serves one goroutine).
func (t *tailWriter) wrap(stdout, stderr io.Writer) (io.Writer, io.Writer) {
	errw := &teeWriter{dst: stderr, tail: t}
	if stdout != nil && sameWriter(stdout, stderr) {
		return errw, errw
	}
	return stdout, errw
}

// sameWriter is a == b for writers whose dynamic type may not be comparable.
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := maxTailLine - len(t.part); room > 0 {
			t.part = append(t.part, chunk[:min(room, len(chunk))]...)
		}
		if i < 0 {
			break
		}
		t.push(string(t.part))
		t.part = t.part[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (t *tailWriter) push(line string) {
	if len(t.lines) == t.max {
		copy(t.lines, t.lines[1:])
		t.lines = t.lines[:t.max-1]
	}
	t.lines = append(t.lines, line)
}

// Lines returns the last lines written, an unterminated last line included.
func (t *tailWriter) Lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := slices.Clone(t.lines)
	if len(t.part) > 0 {
		out = append(out, string(t.part))
		if len(out) > t.max {
			out = out[1:]
		}
	}
	return out
}

// teeWriter passes a process's output on to dst and shows it to tail. Once
// dst fails (an ssh session's pipe closed under a node launcher) the output
// is dropped rather than the error returned: the process keeps writing to a
// pipe that is still read, so it neither blocks nor sees EPIPE, and its
// exit status is not mistaken for a failure to copy output.
type teeWriter struct {
	mu     sync.Mutex // a late Flush may overlap the last Write
	dst    io.Writer
	tail   *tailWriter
	broken bool
}

func (w *teeWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.tail.Write(p)
	if w.dst != nil && !w.broken {
		if _, err := w.dst.Write(p); err != nil {
			w.broken = true
		}
	}
	return len(p), nil
}

// Flush flushes dst when it buffers (a LineWriter's last partial line).
func (w *teeWriter) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f, ok := w.dst.(interface{ Flush() error }); ok && !w.broken {
		return f.Flush()
	}
	return nil
}

// dropWriter passes writes on until the destination fails, then drops
// them, and never reports the failure to the process writing.
type dropWriter struct {
	mu     sync.Mutex
	w      io.Writer
	broken bool
}

func (d *dropWriter) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.broken {
		if _, err := d.w.Write(p); err != nil {
			d.broken = true
		}
	}
	return len(p), nil
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
