package checkpoint

import (
	"fmt"
	"hash/crc32"
	"path/filepath"
)

// Verify streams every file of the tag and compares the header and each
// tensor with the CRC-32C recorded in meta.json. The first mismatch or
// truncation is an error naming the file and the tensor and suggesting the
// previous complete tag.
func (r *Reader) Verify() error {
	if r.verified {
		return nil
	}
	for _, k := range r.meta.Kinds {
		if err := r.verifyKind(k); err != nil {
			return err
		}
	}
	r.verified = true
	return nil
}

func (r *Reader) verifyKind(k Kind) error {
	kf, ok := r.files[k]
	if !ok {
		return fmt.Errorf("checkpoint %s: no %q state (has %v)", r.tag, k, r.meta.Kinds)
	}
	sum, ok := r.meta.Files[k]
	if !ok {
		return r.fileErr(kf, fmt.Errorf("%s records no checksums for it", MetaFile))
	}
	if got := crc32.Checksum(kf.header, castagnoli()); got != sum.HeaderCRC32C {
		return r.fileErr(kf, fmt.Errorf("header checksum mismatch (crc32c %08x, recorded %08x)", got, sum.HeaderCRC32C))
	}
	if len(sum.Tensors) != len(kf.tensors) {
		return r.fileErr(kf, fmt.Errorf("%d tensors, %s records %d", len(kf.tensors), MetaFile, len(sum.Tensors)))
	}
	spans := make([]span, len(kf.tensors))
	for i, t := range kf.tensors {
		if sum.Tensors[i].Name != t.Name {
			return r.fileErr(kf, fmt.Errorf("tensor %d is %q, %s records %q", i, t.Name, MetaFile, sum.Tensors[i].Name))
		}
		spans[i] = span{name: t.Name, begin: kf.dataStart + t.Begin, end: kf.dataStart + t.End}
	}
	crcs, err := crcSpans(kf.f, spans)
	if err != nil {
		return r.fileErr(kf, err)
	}
	for i, c := range crcs {
		if c != sum.Tensors[i].CRC32C {
			return r.fileErr(kf, fmt.Errorf("tensor %q is corrupted (crc32c %08x, recorded %08x)", spans[i].name, c, sum.Tensors[i].CRC32C))
		}
	}
	if st, err := kf.f.Stat(); err == nil && st.Size() != sum.Size {
		return r.fileErr(kf, fmt.Errorf("file is %d bytes, %s records %d", st.Size(), MetaFile, sum.Size))
	}
	return nil
}

// CheckModel compares every file's tensors, in order, with lay and names the
// first that differs: a resume may not silently change the model.
func (r *Reader) CheckModel(lay Layout) error {
	want := lay.Tensors()
	for _, k := range r.meta.Kinds {
		kf := r.files[k]
		for i, w := range want {
			if i >= len(kf.tensors) {
				return r.modelErr(kf, fmt.Errorf("it ends before tensor %q %v that the model has", w.Name, w.Shape))
			}
			got := kf.tensors[i]
			if got.Name != w.Name {
				return r.modelErr(kf, fmt.Errorf("tensor %d is %q %v, the model has %q %v there", i, got.Name, got.Shape, w.Name, w.Shape))
			}
			if !sameShape(got.Shape, w.Shape) {
				return r.modelErr(kf, fmt.Errorf("tensor %q has shape %v, the model's is %v", w.Name, got.Shape, w.Shape))
			}
		}
		if len(kf.tensors) > len(want) {
			extra := kf.tensors[len(want)]
			return r.modelErr(kf, fmt.Errorf("it has tensor %q %v that the model lacks", extra.Name, extra.Shape))
		}
	}
	return nil
}

func (r *Reader) modelErr(kf *kindFile, err error) error {
	return fmt.Errorf("checkpoint %s was saved for a different model (%v): %s: %w",
		r.tag, r.meta.Model.Config(), filepath.Base(kf.path), err)
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
