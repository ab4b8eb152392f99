package trainer

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseStages(t *testing.T) {
	st, err := ParseStages("s.json", "dir", []byte(`{"stages": [
		{"data": ["a/*.bin"], "seq_len": 64, "steps": 10},
		{"name": "long", "data": ["/abs/b.bin"], "val_data": ["v.bin"], "seq_len": 128, "epochs": 1.5, "lr_scale": 0.25, "pack": true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 {
		t.Fatalf("%d stages", len(st))
	}
	a, b := st[0], st[1]
	if a.Name != "stage1" || a.Data[0] != filepath.Join("dir", "a/*.bin") || a.SeqLen != 64 || a.Steps != 10 || a.LRScale != 1 || a.Pack != nil {
		t.Errorf("stage 1: %+v", a)
	}
	if b.Name != "long" || b.Data[0] != "/abs/b.bin" || b.ValData[0] != filepath.Join("dir", "v.bin") || b.Epochs != 1.5 ||
		b.LRScale != 0.25 || b.Pack == nil || !*b.Pack {
		t.Errorf("stage 2: %+v", b)
	}
}

// TestParseStagesErrors: every error names the stage (number and name)
// and the key.
func TestParseStagesErrors(t *testing.T) {
	const d = `"data": ["x.bin"], "seq_len": 8`
	for _, tc := range []struct{ js, want string }{
		{`[]`, "want {"},
		{`{"stage": []}`, `unknown key "stage"`},
		{`{"stages": []}`, "non-empty list"},
		{`{"stages": [{` + d + `, "steps": 1}, {"name": "b", ` + d + `, "setps": 1}]}`, `stage 2 ("b"): unknown key "setps" (did you mean "steps"?)`},
		{`{"stages": [{"data": ["x.bin"], "seq_length": 8, "steps": 1}]}`, `unknown key "seq_length" (did you mean "seq_len"?)`},
		{`{"stages": [{"seq_len": 8, "steps": 1}]}`, `stage 1: "data" is missing`},
		{`{"stages": [{"data": [], "seq_len": 8, "steps": 1}]}`, `stage 1: "data": is empty`},
		{`{"stages": [{"data": "x.bin", "seq_len": 8, "steps": 1}]}`, `stage 1: "data": json`},
		{`{"stages": [{"data": ["x.bin"], "steps": 1}]}`, `stage 1: "seq_len" is missing`},
		{`{"stages": [{"name": "z", ` + d + `, "steps": 0}]}`, `stage 1 ("z"): "steps" is 0`},
		{`{"stages": [{` + d + `, "steps": -3}]}`, `"steps" is -3`},
		{`{"stages": [{` + d + `, "steps": 1.5}]}`, `stage 1: "steps": json`},
		{`{"stages": [{` + d + `}]}`, `stage 1: set exactly one of "steps" and "epochs"`},
		{`{"stages": [{` + d + `, "steps": 1, "epochs": 1}]}`, `set exactly one`},
		{`{"stages": [{` + d + `, "epochs": 0}]}`, `"epochs" is 0`},
		{`{"stages": [{` + d + `, "steps": 1, "lr_scale": 0}]}`, `"lr_scale" is 0`},
		{`{"stages": [{` + d + `, "steps": 1, "lr_scale": -1}]}`, `"lr_scale" is -1`},
		{`{"stages": [{"name": "a", ` + d + `, "steps": 1}, {"name": "a", ` + d + `, "steps": 1}]}`, `stages 1 and 2 are both named "a"`},
		{`{"stages": [{"name": "", ` + d + `, "steps": 1}]}`, `"name" must be a non-empty string`},
		{`{"stages": [{` + d + `, "steps": 1}]} x`, "after the value"},
	} {
		_, err := ParseStages("s.json", "", []byte(tc.js))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "s.json") {
			t.Errorf("%s: error %v, want one naming s.json and %q", tc.js, err, tc.want)
		}
	}
}

// FuzzParseStages: a stages file is untrusted input: never a panic, and a
// file that parses has stages that each name data, a positive sequence
// length, positive steps or epochs (one of them) and a positive scale.
func FuzzParseStages(f *testing.F) {
	f.Add([]byte(`{"stages": [{"data": ["a.bin"], "seq_len": 8, "steps": 2}, {"name": "b", "data": ["b/*.bin"], "seq_len": 16, "epochs": 0.5, "lr_scale": 0.1, "pack": false, "val_data": ["v.bin"]}]}`))
	f.Add([]byte(`{"stages": [{"data": ["a.bin"], "seq_len": 1e2, "steps": 1e1}]}`))
	f.Add([]byte(`{"stages": null}`))
	f.Add([]byte(`{"stages": [{"name": 3}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ParseStages("f.json", "d", b)
		if err != nil {
			return
		}
		if len(st) == 0 {
			t.Fatal("no stages and no error")
		}
		for i, s := range st {
			if len(s.Data) == 0 || s.SeqLen < 1 || (s.Steps >= 1) == (s.Epochs > 0) || !(s.LRScale > 0) || math.IsInf(s.LRScale, 0) || s.Name == "" {
				t.Fatalf("stage %d accepted as %+v", i+1, s)
			}
		}
	})
}
