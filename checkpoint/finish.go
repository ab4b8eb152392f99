package checkpoint

import (
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"time"

	"github.com/gotrain/gotrain/internal/regularfile"
)

// Finish completes the tag on every rank. Each rank fsyncs and closes its
// files, then, after a barrier, rank 0 checksums every tensor (streaming),
// writes meta.json, fsyncs it and the directory, renames ".<tag>.tmp" to
// <tag>, fsyncs the checkpoints directory, replaces "latest" atomically and
// only then applies SaveTotalLimit. A second barrier holds the other ranks
// until rank 0 is done, so a returning rank may rely on the tag existing
// when rank 0 reports no error; rank 0's error is returned on rank 0 only,
// and the caller agrees on the outcome across ranks (an all-reduce of a
// failure flag) if it needs to.
//
// meta's Tag, WorldSize, Layout, NumParams, Kinds, Files, Created and
// checksum are set here; FormatVersion is set to this package's version.
// meta.RunID names the lineage whose older tags SaveTotalLimit may prune.
//
// When the save fails before the rename, rank 0 removes ".<tag>.tmp" and
// the error says so: a partial tag would only hold disk space.
func (w *TagWriter) Finish(meta Metadata) error {
	syncErr := w.syncFiles()
	if err := w.opts.Barrier(); err != nil {
		return w.failed(errors.Join(syncErr, fmt.Errorf("checkpoint %s: barrier after writes: %w", w.tag, err)))
	}
	var commitErr error
	if w.opts.Rank == 0 {
		if syncErr != nil {
			commitErr = syncErr
		} else {
			commitErr = w.commit(meta)
		}
	}
	if err := w.opts.Barrier(); err != nil {
		return w.failed(errors.Join(syncErr, commitErr, fmt.Errorf("checkpoint %s: barrier after commit: %w", w.tag, err)))
	}
	return w.failed(errors.Join(syncErr, commitErr))
}

// commit is rank 0's part of Finish.
func (w *TagWriter) commit(meta Metadata) error {
	tmp := filepath.Join(w.dir, tmpName(w.tag))
	meta.FormatVersion = FormatVersion
	meta.Tag = w.tag
	meta.WorldSize = w.opts.World
	meta.Layout = LayoutName
	meta.NumParams = w.lay.NumParams()
	meta.Kinds = append([]Kind(nil), w.kinds...)
	meta.Files = map[Kind]FileSummary{}
	meta.Created = time.Now().UTC()
	for _, k := range w.kinds {
		sum, err := summarize(filepath.Join(tmp, k.FileName()), fileSpans(w.lay, k))
		if err != nil {
			return fmt.Errorf("checkpoint %s: %w", w.tag, err)
		}
		meta.Files[k] = sum
	}
	js, err := encodeMeta(meta)
	if err != nil {
		return fmt.Errorf("checkpoint %s: encode %s: %w", w.tag, MetaFile, err)
	}
	if err := writeSynced(filepath.Join(tmp, MetaFile), js); err != nil {
		return fmt.Errorf("checkpoint %s: %w", w.tag, err)
	}
	if err := syncDir(tmp); err != nil {
		return fmt.Errorf("checkpoint %s: %w", w.tag, err)
	}
	final := filepath.Join(w.dir, w.tag)
	if err := replaceDir(tmp, final); err != nil {
		return fmt.Errorf("checkpoint %s: %w", w.tag, err)
	}
	if err := syncDir(w.dir); err != nil {
		return fmt.Errorf("checkpoint %s: %w", w.tag, err)
	}
	if err := writeLatest(w.dir, w.tag); err != nil {
		return fmt.Errorf("checkpoint %s: %w", w.tag, err)
	}
	if w.opts.SaveTotalLimit > 0 {
		if _, err := Prune(w.dir, w.opts.SaveTotalLimit, meta.RunID, meta.Step); err != nil {
			return fmt.Errorf("checkpoint %s saved, but: %w", w.tag, err)
		}
	}
	return nil
}

// fileSpans lists the tensors' absolute byte ranges in kind's file for lay.
func fileSpans(lay Layout, kind Kind) []span {
	data := int64(len(fileHeader(lay, kind)))
	out := make([]span, 0, len(lay.Tensors()))
	for _, t := range lay.Tensors() {
		out = append(out, span{name: t.Name, begin: data + 4*int64(t.Offset), end: data + 4*int64(t.Offset+t.Len)})
	}
	return out
}

// summarize fsyncs path and checksums its header and the given spans.
func summarize(path string, spans []span) (FileSummary, error) {
	name := filepath.Base(path)
	f, st, err := regularfile.Open("checkpoint file", path)
	if err != nil {
		return FileSummary{}, err
	}
	defer f.Close()
	hdrLen := int64(0)
	if len(spans) > 0 {
		hdrLen = spans[0].begin
	}
	hdr := make([]byte, hdrLen)
	if _, err := f.ReadAt(hdr, 0); err != nil {
		return FileSummary{}, fmt.Errorf("%s: read header: %w", name, err)
	}
	crcs, err := crcSpans(f, spans)
	if err != nil {
		return FileSummary{}, fmt.Errorf("%s: %w", name, err)
	}
	sum := FileSummary{Name: name, Size: st.Size(), HeaderCRC32C: crc32.Checksum(hdr, castagnoli())}
	for i, s := range spans {
		sum.Tensors = append(sum.Tensors, TensorChecksum{Name: s.name, CRC32C: crcs[i]})
	}
	return sum, nil
}
