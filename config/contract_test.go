package config

import (
	"errors"
	"testing"
)

// TestEveryErrorNamesFileKeyAndFix runs a corpus of broken configs and checks the error contract: each error
// names the file, a key path or a position, and a fix; all problems of a file are reported together.
func TestEveryErrorNamesFileKeyAndFix(t *testing.T) {
	corpus := []string{
		`{"train_batch_size": 0, "zero_optimization": {"stage": 7, "overlap_comm": "yes"}, "fp16": {"enabled": true}, "bf16": {"enabled": true}}`,
		`{"optimizer": {"type": "Adamm", "params": {"lr": -1}}, "scheduler": {"type": "Cosine"}, "gradient_clipping": "1.0"}`,
		`{"train_micro_batch_size_per_gpu": 2, "zero_optimisation": {}, "tensorboard": {"enabled": true, "path": "x"}, "steps_per_print": 2.5}`,
		`{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 1, "cpu_offload": true, "offload_optimizer": {"device": "disk"}}}`,
		`{"train_micro_batch_size_per_gpu": "8", "amp": {"enabled": true}, "zero_optimization": {"stage": 2}, "communication_data_type": 16}`,
		`{"a": 1, "a": 2}`,
		`{"train_micro_batch_size_per_gpu": 2,}} `,
	}
	for _, src := range corpus {
		_, err := Parse(testFile, []byte(src), Options{Strict: true, Overrides: Overrides{WorldSize: 3}})
		var es Errors
		if !errors.As(err, &es) || len(es) == 0 {
			t.Errorf("%s: got %v, want Errors", src, err)
			continue
		}
		for _, e := range es {
			if e.File != testFile || e.Fix == "" || (e.Path == "" && e.Line == 0) || e.Msg == "" {
				t.Errorf("%s: incomplete error %+v", src, e)
			}
		}
	}
	// The first corpus entry has five independent problems; all are reported.
	_, err := Parse(testFile, []byte(corpus[0]), Options{Strict: true})
	if es := err.(Errors); len(es) < 4 {
		t.Errorf("only %d errors reported: %v", len(es), es)
	}
}
