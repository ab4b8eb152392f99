package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/gotrain/gotrain/model"
)

// FuzzTagReader feeds the reader of a tag directory untrusted bytes: the
// tag's meta.json (optionally with its checksum recomputed, so the fields
// behind it are reached too), the "latest" file and the head (length
// prefix and JSON header) of one state file. List, Open, Verify,
// ReadRange, OpenNewestVerified and Prune either work or return an error;
// none panics, and nothing outside the directory is read. The model is one
// small block so the inputs stay small: the fuzzer minimizes every new
// input, which for large ones takes most of a short run.
func FuzzTagReader(f *testing.F) {
	cfg := model.GPT2(model.Config{MaxT: 4, V: 8, Vp: model.PadVocab(8), L: 1, NH: 1, C: 4})
	lay := model.NewLayout(cfg)
	seedDir := f.TempDir()
	if err := saveOrCrash(seedDir, lay, sourceState(cfg, 1), 10, 1, 0, false); err != nil {
		f.Fatal(err)
	}
	tagDir := filepath.Join(seedDir, "global_step10")
	meta, err := os.ReadFile(filepath.Join(tagDir, MetaFile))
	if err != nil {
		f.Fatal(err)
	}
	state, err := os.ReadFile(filepath.Join(tagDir, ExpAvg.FileName()))
	if err != nil {
		f.Fatal(err)
	}
	params, _ := os.ReadFile(filepath.Join(tagDir, Params.FileName()))
	sq, _ := os.ReadFile(filepath.Join(tagDir, ExpAvgSq.FileName()))
	head := state[:len(fileHeader(lay, ExpAvg))]
	f.Add(meta, false, []byte("global_step10\n"), head)
	f.Add(meta, true, []byte("global_step10"), head[:len(head)/2])
	f.Add(bytes.Replace(meta, []byte(`"step": 10`), []byte(`"step": 3000000000000`), 1), true, []byte("../x"), []byte{})
	f.Add(bytes.Replace(meta, []byte(`"exp_avg"`), []byte(`"../../etc/passwd"`), 1), true, []byte(""), head)
	f.Add([]byte(`{"format_version":1,"layout":"gotrain-flat","num_params":-1,"kinds":["params"]}`), false, []byte("global_step10"), head)
	f.Fuzz(func(t *testing.T, metaJSON []byte, fixSum bool, latest, stateHead []byte) {
		stateFile := append(append([]byte(nil), stateHead...), state[min(len(head), len(state)):]...)
		dir := t.TempDir()
		tag := filepath.Join(dir, "global_step10")
		if err := os.Mkdir(tag, 0o755); err != nil {
			t.Fatal(err)
		}
		if fixSum && bytes.HasPrefix(metaJSON, []byte(metaSumPrefix)) && len(metaJSON) > len(metaSumPrefix)+64 {
			blank := append([]byte(metaSumPrefix), metaJSON[len(metaSumPrefix)+64:]...)
			sum := sha256.Sum256(blank)
			metaJSON = append([]byte(metaSumPrefix+hex.EncodeToString(sum[:])), metaJSON[len(metaSumPrefix)+64:]...)
		}
		for name, b := range map[string][]byte{MetaFile: metaJSON, Params.FileName(): params, ExpAvgSq.FileName(): sq, ExpAvg.FileName(): stateFile} {
			if err := os.WriteFile(filepath.Join(tag, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, LatestFile), latest, 0o644); err != nil {
			t.Fatal(err)
		}
		List(dir)
		if r, err := Open(dir, ""); err == nil {
			if r.Verify() == nil {
				m := r.Meta()
				for _, k := range m.Kinds {
					if _, err := r.ReadRange(k, 0, min(m.NumParams, 1<<16)); err != nil {
						t.Errorf("verified tag: ReadRange %s: %v", k, err)
					}
				}
			}
			r.CheckModel(lay)
			r.Close()
		}
		if r, _, err := OpenNewestVerified(dir); err == nil {
			r.Close()
		}
		Prune(dir, 1, "fuzz", 10)
	})
}

// FuzzMetaJSON is decodeMeta alone, in memory (fast enough to explore the
// checksum and field checks deeply): any bytes decode to checked metadata
// or an error naming the file, and whatever decodes re-encodes to a file
// that decodes to the same metadata.
func FuzzMetaJSON(f *testing.F) {
	m := Metadata{FormatVersion: FormatVersion, Tag: "global_step3", Step: 3, Samples: 12, WorldSize: 2, Layout: LayoutName,
		NumParams: 10, Kinds: AllKinds(), RunID: "abc", Fields: []Field{{Name: "seq_len", Value: "64", Math: true}}}
	good, err := encodeMeta(m)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(bytes.Replace(good, []byte(`"step": 3`), []byte(`"step": 3000000000000`), 1))
	f.Add([]byte(`{"format_version":1,"kinds":["params","params"]}`))
	f.Add([]byte(`{"format_version":1,"step":-1}`))
	f.Add([]byte(metaSumPrefix + `"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, _, err := decodeMeta("meta.json", b)
		if err != nil {
			return
		}
		again, err := encodeMeta(got)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if _, _, err := decodeMeta("meta.json", again); err != nil {
			t.Fatalf("a re-encoded meta.json fails: %v\n%s", err, again)
		}
	})
}
