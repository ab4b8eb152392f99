package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"github.com/gotrain/gotrain/internal/regularfile"
)

// metaSumPrefix is how every meta.json of FormatVersion 2 begins: the
// checksum is the first key, so the reader finds its value at a fixed
// offset and hashes the file with that value blanked, without re-encoding
// (which would make the checksum depend on Go's JSON encoder).
const metaSumPrefix = "{\n  \"meta_sha256\": \""

// encodeMeta renders meta.json with its checksum.
func encodeMeta(m Metadata) ([]byte, error) {
	m.Checksum = ""
	js, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	js = append(js, '\n')
	if !bytes.HasPrefix(js, []byte(metaSumPrefix+`"`)) {
		return nil, fmt.Errorf("meta_sha256 is not the first key of %s", MetaFile)
	}
	sum := sha256.Sum256(js)
	out := make([]byte, 0, len(js)+sha256.Size*2)
	out = append(out, metaSumPrefix...)
	out = append(out, hex.EncodeToString(sum[:])...)
	return append(out, js[len(metaSumPrefix):]...), nil
}

// decodeMeta parses meta.json and checks its checksum. legacy is true for
// a version 1 file, which has none.
func decodeMeta(path string, b []byte) (m Metadata, legacy bool, err error) {
	if err := json.Unmarshal(b, &m); err != nil {
		return Metadata{}, false, fmt.Errorf("%s: %w", path, err)
	}
	const hexLen = 2 * sha256.Size
	switch {
	case bytes.HasPrefix(b, []byte(metaSumPrefix)):
		rest := b[len(metaSumPrefix):]
		if len(rest) < hexLen+1 || rest[hexLen] != '"' || m.Checksum != string(rest[:hexLen]) {
			return Metadata{}, false, fmt.Errorf("%s: malformed meta_sha256 value: the file was edited or damaged after the save", path)
		}
		blank := make([]byte, 0, len(b))
		blank = append(blank, metaSumPrefix...)
		blank = append(blank, rest[hexLen:]...)
		sum := sha256.Sum256(blank)
		if got := hex.EncodeToString(sum[:]); got != m.Checksum {
			return Metadata{}, false, fmt.Errorf("%s does not match its checksum (recorded sha256 %.12s…, computed %.12s…): it was edited or damaged after the save",
				path, m.Checksum, got)
		}
	case m.FormatVersion == 1 && m.Checksum == "":
		legacy = true
	default:
		return Metadata{}, false, fmt.Errorf("%s (format version %d) does not begin with its meta_sha256 checksum: it was edited or damaged after the save", path, m.FormatVersion)
	}
	if err := m.check(); err != nil {
		return Metadata{}, false, fmt.Errorf("%s: %w", path, err)
	}
	return m, legacy, nil
}

// check rejects values no save writes, so a damaged legacy file cannot
// steer a reader (a state kind is also a file name).
func (m Metadata) check() error {
	if m.Step < 0 || m.Samples < 0 || m.Tokens < 0 || m.WorldSize < 0 || m.NumParams < 0 {
		return fmt.Errorf("negative step, samples, tokens, world size or parameter count (step %d, samples %d, tokens %d, world %d, params %d)",
			m.Step, m.Samples, m.Tokens, m.WorldSize, m.NumParams)
	}
	seen := map[Kind]bool{}
	for _, k := range m.Kinds {
		if !k.valid() || seen[k] {
			return fmt.Errorf("bad or repeated state kind %q (want some of %v)", k, AllKinds())
		}
		seen[k] = true
	}
	return nil
}

// maxMetaBytes bounds what is read of a meta.json: a real one is kilobytes
// (the config text, the run fields, a checksum per tensor).
const maxMetaBytes = 64 << 20

// readMeta reads and checks a tag directory's meta.json.
func readMeta(tagDir string) (Metadata, bool, error) {
	path := filepath.Join(tagDir, MetaFile)
	f, _, err := regularfile.Open("checkpoint metadata", path)
	if err != nil {
		return Metadata{}, false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMetaBytes+1))
	if err != nil {
		return Metadata{}, false, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxMetaBytes {
		return Metadata{}, false, fmt.Errorf("%s is over %d MiB: not a meta.json gotrain wrote (damaged or replaced file)", path, maxMetaBytes>>20)
	}
	return decodeMeta(path, b)
}
