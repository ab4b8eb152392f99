package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/gotrain/gotrain/internal/regularfile"
	"github.com/gotrain/gotrain/model"
)

// Reader reads one complete tag. Any rank of any world size reads the flat
// ranges it owns: resharding is reading different ranges. ReadRange is safe
// for concurrent use (positioned reads); Close is not.
type Reader struct {
	dir, tag string
	meta     Metadata
	files    map[Kind]*kindFile
	warnings []string
	verified bool // Verify passed; a second call does not stream the files again
}

// kindFile is one open state file.
type kindFile struct {
	path      string
	f         *os.File
	dataStart int64
	header    []byte // length prefix and JSON, as stored
	tensors   []model.TensorHeader
}

// Open opens tag in the checkpoints directory dir; tag "" means the one
// "latest" names. Headers are parsed and checked here; tensor bytes are
// checked by Verify.
func Open(dir, tag string) (*Reader, error) {
	if tag == "" {
		t, ok, err := readLatest(dir)
		if err != nil {
			return nil, fmt.Errorf("open checkpoint: %w", err)
		}
		if !ok {
			return nil, fmt.Errorf("open checkpoint: no %q file in %s: %s", LatestFile, dir, describeTags(dir))
		}
		tag = t
	}
	if err := checkTag(tag); err != nil {
		return nil, fmt.Errorf("open checkpoint: %w", err)
	}
	tagDir := filepath.Join(dir, tag)
	if _, err := os.Stat(tagDir); err != nil {
		return nil, fmt.Errorf("open checkpoint %s: %w; %s", tag, err, describeTags(dir))
	}
	meta, legacy, err := readMeta(tagDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("open checkpoint %s: incomplete, it has no %s; %s", tag, MetaFile, describeTags(dir))
	}
	if err != nil {
		return nil, fmt.Errorf("open checkpoint %s: %w; %s", tag, err, describeTags(dir))
	}
	if (meta.FormatVersion != FormatVersion && !legacy) || meta.Layout != LayoutName {
		return nil, fmt.Errorf("open checkpoint %s: format version %d, layout %q; this gotrain reads versions 1 and %d, layout %q",
			tag, meta.FormatVersion, meta.Layout, FormatVersion, LayoutName)
	}
	if n, ok := tagStep(tag); ok && n != meta.Step {
		return nil, fmt.Errorf("open checkpoint %s: %s says step %d, but the tag's name says %d (the file was edited or copied between tags); %s",
			tag, MetaFile, meta.Step, n, describeTags(dir))
	}
	var warnings []string
	if legacy {
		warnings = append(warnings, fmt.Sprintf("checkpoint %s was written before %s carried its own checksum (format version 1): its step, run id and settings cannot be checked; the tensors still are",
			tag, MetaFile))
	}
	r := &Reader{dir: dir, tag: tag, meta: meta, files: map[Kind]*kindFile{}, warnings: warnings}
	for _, k := range meta.Kinds {
		kf, err := openKind(filepath.Join(tagDir, k.FileName()), meta.NumParams)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("open checkpoint %s: %w%s", tag, err, r.suggestion())
		}
		r.files[k] = kf
	}
	return r, nil
}

// openKind parses a state file's header and checks that its tensors are F32
// and tile flat elements [0, numParams) in order. The file's length is not
// checked against the header here, so a truncated file is reported by
// Verify or ReadRange with the tensor it cuts.
func openKind(path string, numParams int) (*kindFile, error) {
	name := filepath.Base(path)
	f, _, err := regularfile.Open("checkpoint state file", path)
	if err != nil {
		return nil, err
	}
	fail := func(format string, a ...any) (*kindFile, error) {
		f.Close()
		return nil, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, a...))
	}
	var lenBuf [8]byte
	if _, err := f.ReadAt(lenBuf[:], 0); err != nil {
		return fail("read header length: %v", err)
	}
	hlen := binary.LittleEndian.Uint64(lenBuf[:])
	if hlen > 1<<30 {
		return fail("header length %d is implausible (corrupted file)", hlen)
	}
	// Checked before allocating: a damaged length must not cost a GiB.
	if st, err := f.Stat(); err != nil || uint64(st.Size()) < 8+hlen {
		return fail("header length %d runs past the end of the file (truncated or corrupted file)", hlen)
	}
	header := make([]byte, 8+hlen)
	if _, err := f.ReadAt(header, 0); err != nil {
		return fail("read the %d-byte header: %v", hlen, err)
	}
	dataStart := int64(8 + hlen)
	tensors, meta, err := model.ParseSafetensorsHeader(header[8:], math.MaxInt64-dataStart)
	if err != nil {
		return fail("%v", err)
	}
	if meta["layout"] != LayoutName {
		return fail("__metadata__ layout is %q, want %q", meta["layout"], LayoutName)
	}
	var next int64
	for _, t := range tensors {
		if t.DType != "F32" {
			return fail("tensor %q is %s, want F32", t.Name, t.DType)
		}
		if t.Begin != next {
			return fail("tensor %q starts at byte %d, want %d (tensors must follow each other without gaps)", t.Name, t.Begin, next)
		}
		next = t.End
	}
	if next != 4*int64(numParams) {
		return fail("tensors hold %d values, %s says %d", next/4, MetaFile, numParams)
	}
	return &kindFile{path: path, f: f, dataStart: dataStart, header: header, tensors: tensors}, nil
}

// Tag is the tag this reader opened.
func (r *Reader) Tag() string { return r.tag }

// Dir is the checkpoints directory the tag is in.
func (r *Reader) Dir() string { return r.dir }

// Meta is the tag's meta.json.
func (r *Reader) Meta() Metadata { return r.meta }

// Warnings are what the caller should tell the user about this tag (a
// meta.json too old to carry a checksum).
func (r *Reader) Warnings() []string { return r.warnings }

// OpenNewestVerified opens the complete tag with the highest step in the
// checkpoints directory dir whose files pass Verify: how a resume proceeds
// when "latest" is missing. skipped lists the newer tags passed over, each
// with its reason. With no tag that verifies, the error lists every tag
// and what is wrong with it.
func OpenNewestVerified(dir string) (r *Reader, skipped []string, err error) {
	tags, err := List(dir)
	if err != nil {
		return nil, nil, err
	}
	for i := len(tags) - 1; i >= 0; i-- {
		t := tags[i]
		if !t.Complete {
			skipped = append(skipped, t.Tag+": "+t.Problem)
			continue
		}
		r, err := Open(dir, t.Tag)
		if err == nil {
			if err = r.Verify(); err != nil {
				r.Close()
			}
		}
		if err != nil {
			skipped = append(skipped, t.Tag+": "+err.Error())
			continue
		}
		return r, skipped, nil
	}
	if len(tags) == 0 {
		return nil, nil, fmt.Errorf("no checkpoint tags in %s", dir)
	}
	return nil, skipped, fmt.Errorf("no checkpoint in %s verifies:\n  %s", dir, strings.Join(skipped, "\n  "))
}

// Close releases the files.
func (r *Reader) Close() error {
	var errs []error
	for k, kf := range r.files {
		errs = append(errs, kf.f.Close())
		delete(r.files, k)
	}
	return errors.Join(errs...)
}

// ReadRange returns flat elements [flatOff, flatOff+n) of kind.
func (r *Reader) ReadRange(kind Kind, flatOff, n int) ([]float32, error) {
	out := make([]float32, n)
	if err := r.ReadRangeInto(kind, flatOff, out); err != nil {
		return nil, err
	}
	return out, nil
}

// ReadRangeInto fills dst with flat elements [flatOff, flatOff+len(dst)) of
// kind, reading in bounded chunks.
func (r *Reader) ReadRangeInto(kind Kind, flatOff int, dst []float32) error {
	kf, ok := r.files[kind]
	if !ok {
		return fmt.Errorf("checkpoint %s: no %q state (has %v)", r.tag, kind, r.meta.Kinds)
	}
	if flatOff < 0 || flatOff+len(dst) > r.meta.NumParams {
		return fmt.Errorf("checkpoint %s: %s range [%d, %d) outside the %d parameters", r.tag, kind, flatOff, flatOff+len(dst), r.meta.NumParams)
	}
	buf := make([]byte, 4*min(len(dst), writeChunk))
	for done := 0; done < len(dst); {
		n := min(len(dst)-done, writeChunk)
		b := buf[:4*n]
		off := kf.dataStart + 4*int64(flatOff+done)
		if _, err := kf.f.ReadAt(b, off); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				st, serr := kf.f.Stat()
				if serr == nil {
					return r.fileErr(kf, kf.truncation(st.Size()))
				}
			}
			return fmt.Errorf("checkpoint %s: read %s: %w", r.tag, filepath.Base(kf.path), err)
		}
		for i := range n {
			dst[done+i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		done += n
	}
	return nil
}

// truncation names the first tensor a file of size bytes cuts.
func (kf *kindFile) truncation(size int64) error {
	for _, t := range kf.tensors {
		if kf.dataStart+t.End > size {
			return &truncatedError{tensor: t.Name, begin: kf.dataStart + t.Begin, end: kf.dataStart + t.End, size: size}
		}
	}
	return fmt.Errorf("file ends at %d bytes", size)
}

// fileErr wraps a problem with one of the tag's files with the file's name
// and the previous complete tag to fall back to.
func (r *Reader) fileErr(kf *kindFile, err error) error {
	return fmt.Errorf("checkpoint %s: %s: %w%s", r.tag, filepath.Base(kf.path), err, r.suggestion())
}

// suggestion points at the newest complete tag older than this one.
func (r *Reader) suggestion() string {
	if prev := previousComplete(r.dir, r.meta.Step); prev != "" && prev != r.tag {
		return fmt.Sprintf("; the previous complete checkpoint is %s (load it by tag, or write %q into %s)", prev, prev, filepath.Join(r.dir, LatestFile))
	}
	return "; no earlier complete checkpoint exists"
}

// describeTags lists the tags in dir for error messages.
func describeTags(dir string) string {
	tags, err := List(dir)
	if err != nil {
		return err.Error()
	}
	var names []string
	for _, t := range tags {
		s := t.Tag
		switch {
		case t.Complete:
		case strings.HasPrefix(t.Problem, "incomplete"):
			s += " (incomplete)"
		default:
			s += " (damaged " + MetaFile + ")"
		}
		names = append(names, s)
	}
	if len(names) == 0 {
		return "no checkpoint tags found there"
	}
	return "tags found: " + strings.Join(names, ", ") + "; pass one explicitly"
}
