package config

import (
	"fmt"
	"strings"
	"testing"
)

// batchJSON writes a config with the given batch keys (0 = absent).
func batchJSON(tbs, micro, gas int) string {
	var parts []string
	if tbs != 0 {
		parts = append(parts, fmt.Sprintf(`"train_batch_size": %d`, tbs))
	}
	if micro != 0 {
		parts = append(parts, fmt.Sprintf(`"train_micro_batch_size_per_gpu": %d`, micro))
	}
	if gas != 0 {
		parts = append(parts, fmt.Sprintf(`"gradient_accumulation_steps": %d`, gas))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// TestResolveInferenceTable checks each row of DeepSpeed's inference table (deepspeed-semantics §1.1). The
// expected values are the table's formulas evaluated by hand.
func TestResolveInferenceTable(t *testing.T) {
	cases := []struct {
		name            string
		tbs, micro, gas int // given (0: absent)
		ws              int
		want            Batch
	}{
		{"all three consistent", 64, 4, 4, 4, Batch{64, 4, 4, 4, nil}},
		{"TBS+micro: gas = TBS // micro // ws", 64, 4, 0, 2, Batch{64, 4, 8, 2, []string{keyGAS}}},
		{"TBS+gas: micro = TBS // ws // gas", 96, 0, 3, 4, Batch{96, 8, 3, 4, []string{keyMicro}}},
		{"micro+gas: TBS = micro*gas*ws", 0, 2, 16, 8, Batch{256, 2, 16, 8, []string{keyTBS}}},
		{"only TBS: gas = 1, micro = TBS // ws", 32, 0, 0, 8, Batch{32, 4, 1, 8, []string{keyMicro, keyGAS}}},
		{"only micro: gas = 1, TBS = micro*ws", 0, 6, 0, 3, Batch{18, 6, 1, 3, []string{keyTBS, keyGAS}}},
		{"world size 1", 0, 1, 1, 1, Batch{1, 1, 1, 1, []string{keyTBS}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, batchJSON(tc.tbs, tc.micro, tc.gas), Overrides{})
			got, err := c.Resolve(tc.ws)
			if err != nil {
				t.Fatal(err)
			}
			if got.TrainBatchSize != tc.want.TrainBatchSize || got.MicroBatch != tc.want.MicroBatch ||
				got.GradAccum != tc.want.GradAccum || got.WorldSize != tc.want.WorldSize ||
				strings.Join(got.Inferred, ",") != strings.Join(tc.want.Inferred, ",") {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if got.TrainBatchSize != got.MicroBatch*got.GradAccum*got.WorldSize {
				t.Errorf("invariant broken: %+v", got)
			}
			// Resolving through Parse with a world size gives the same answer.
			if _, es := parseCfg(t, batchJSON(tc.tbs, tc.micro, tc.gas), Options{Strict: true, Overrides: Overrides{WorldSize: tc.ws}}); es != nil {
				t.Errorf("Parse with world size %d: %v", tc.ws, es)
			}
		})
	}
}

// TestResolveErrors checks DeepSpeed's batch errors and that gotrain's messages carry the inference, the
// failing check, and values that would work.
func TestResolveErrors(t *testing.T) {
	cases := []struct {
		name            string
		tbs, micro, gas int
		ws              int
		path            string
		msg, fix        []string
	}{
		{"TBS=10 micro=3 ws=1 (gas inferred as 3, 10 != 9)", 10, 3, 0, 1, keyTBS,
			[]string{"gradient_accumulation_steps = 10 // 3 // 1 = 3", "10 != 3 * 3 * 1", "not a multiple"},
			[]string{"train_batch_size to 9 or 12", "divisor of 10/1 = 10 such as 1, 2, 5 or 10"}},
		{"TBS+micro gives gas 0", 8, 16, 0, 1, keyTBS,
			[]string{"= 0", "8 != 16 * 0 * 1"},
			[]string{"train_batch_size to 16"}},
		{"TBS+micro with TBS not divisible by world size", 30, 2, 0, 4, keyTBS,
			[]string{"gradient_accumulation_steps = 30 // 2 // 4 = 3"},
			[]string{"train_batch_size to 24 or 32", "no micro batch works"}},
		{"TBS+gas: micro inferred", 100, 0, 3, 4, keyTBS,
			[]string{"train_micro_batch_size_per_gpu = 100 // 4 // 3 = 8", "100 != 8 * 3 * 4"},
			[]string{"train_batch_size to 96 or 108", "gradient_accumulation_steps to a divisor of 100/4 = 25 such as 1, 5 or 25"}},
		{"only TBS, not divisible by ws", 10, 0, 0, 4, keyTBS,
			[]string{"train_micro_batch_size_per_gpu = 10 // 4 = 2", "10 != 2 * 1 * 4"},
			[]string{"train_batch_size to 8 or 12", "world size that divides 10 such as 1, 2, 5 or 10"}},
		{"all three inconsistent: wrong world size", 64, 4, 4, 2, keyTBS,
			[]string{"64 != train_micro_batch_size_per_gpu 4 × gradient_accumulation_steps 4 × world size 2 = 32", "64 != 4 * 4 * 2"},
			[]string{"set train_batch_size to 32", "remove train_batch_size", "gradient_accumulation_steps to 8", "world size of 4"}},
		{"neither TBS nor micro", 0, 0, 4, 2, keyMicro,
			[]string{"Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided"},
			[]string{"train_micro_batch_size_per_gpu"}},
		{"zero micro batch", 0, -1, 0, 2, keyMicro,
			[]string{"Micro batch size per gpu: -1 has to be greater than 0"}, []string{"positive"}},
		{"zero gas", 8, 0, -2, 2, keyGAS,
			[]string{"Gradient accumulation steps: -2 has to be greater than 0"}, []string{"positive"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := batchJSON(tc.tbs, tc.micro, tc.gas)
			c, es := parseCfg(t, src, Options{Strict: true})
			if c == nil {
				t.Fatalf("no config: %v", es)
			}
			_, err := c.Resolve(tc.ws)
			if err == nil {
				t.Fatalf("Resolve(%d) succeeded for %s", tc.ws, src)
			}
			list, ok := err.(Errors)
			if !ok || len(list) == 0 {
				t.Fatalf("error %T %v, want Errors", err, err)
			}
			e := errAt(list, tc.path)
			if e == nil {
				t.Fatalf("no error at %s: %v", tc.path, list)
			}
			if e.File != testFile {
				t.Errorf("file = %q", e.File)
			}
			containsAll(t, "message", e.Msg, tc.msg...)
			containsAll(t, "fix", e.Fix, tc.fix...)
		})
	}
}

func TestResolveWorldSizeInvalid(t *testing.T) {
	c := mustParse(t, batchJSON(0, 2, 0), Overrides{})
	for _, ws := range []int{0, -3} {
		if _, err := c.Resolve(ws); err == nil {
			t.Errorf("Resolve(%d) succeeded", ws)
		}
	}
}

func TestResolveHugeValuesDoNotPanic(t *testing.T) {
	for _, src := range []string{
		`{"train_batch_size": 9223372036854775807, "train_micro_batch_size_per_gpu": 3}`,
		`{"train_batch_size": 9223372036854775806, "train_micro_batch_size_per_gpu": 4611686018427387904, "gradient_accumulation_steps": 4611686018427387904}`,
		`{"train_micro_batch_size_per_gpu": 4611686018427387904, "gradient_accumulation_steps": 4611686018427387904}`,
	} {
		c := mustParse(t, src, Overrides{})
		for _, ws := range []int{1, 7, 1 << 40} {
			_, _ = c.Resolve(ws) // must return, with or without an error
		}
	}
}
