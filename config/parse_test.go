package config

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseRelaxedSyntax(t *testing.T) {
	src := "\ufeff" + `// leading comment
# hash comment
{
  /* block
     comment */
  "train_micro_batch_size_per_gpu": 4, // trailing comment
  "tensorboard": {
    "enabled": false,
    "output_path": "runs//logs#1 /* not a comment */",  # a comment after a string holding comment markers
    "job_name": "a\"b\\c\u00e9\ud83d\ude00",
  },
  "comms_logger": {"prof_ops": ["all_reduce", "all_gather",],},
}
`
	c := mustParse(t, src, Overrides{})
	if c.TrainMicroBatchSizePerGPU != Some(4) {
		t.Errorf("micro batch = %v, want 4", c.TrainMicroBatchSizePerGPU)
	}
	if got, want := c.TensorBoard.OutputPath, "runs//logs#1 /* not a comment */"; got != want {
		t.Errorf("output_path = %q, want %q", got, want)
	}
	if got, want := c.TensorBoard.JobName, "a\"b\\cé😀"; got != want {
		t.Errorf("job_name = %q, want %q", got, want)
	}
	if got := strings.Join(c.CommsLogger.ProfOps, ","); got != "all_reduce,all_gather" {
		t.Errorf("prof_ops = %q", got)
	}
}

func TestParseIntegersWrittenAsFloats(t *testing.T) {
	cases := []struct {
		lit  string
		want int64
	}{
		{"5e8", 500000000},
		{"5E8", 500000000},
		{"2.5e8", 250000000},
		{"1e9", 1000000000},
		{"500000000.0", 500000000},
		{"123", 123},
		{"9223372036854775807", 9223372036854775807}, // sys.maxsize, exact: not routed through float64
	}
	for _, tc := range cases {
		c := mustParse(t, `{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage3_model_persistence_threshold": `+tc.lit+`}}`, Overrides{})
		if got := c.ZeRO.Stage3ModelPersistenceThreshold; got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.lit, got, tc.want)
		}
	}
	for _, lit := range []string{"2.5", "5e-1", "1e30"} {
		_, es := parseCfg(t, `{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"reduce_bucket_size": `+lit+`}}`, Options{Strict: true})
		e := errAt(es, "zero_optimization.reduce_bucket_size")
		if e == nil {
			t.Errorf("%s accepted for an integer key; errors: %v", lit, es)
			continue
		}
		// The value starts in column 83: 82 characters precede it on the line.
		if e.Line != 1 || e.Col != 83 {
			t.Errorf("%s: error at %d:%d, want 1:83", lit, e.Line, e.Col)
		}
	}
}

func TestParseDuplicateKeys(t *testing.T) {
	src := "{\n  \"train_micro_batch_size_per_gpu\": 1,\n  \"bf16\": {\"enabled\": true},\n  \"bf16\": {\"enabled\": false},\n  \"zero_optimization\": {\"stage\": 1, \"stage\": 2}\n}"
	_, es := parseCfg(t, src, Options{Strict: true})
	if len(es) != 2 {
		t.Fatalf("got %d errors, want 2 (one per duplicate): %v", len(es), es)
	}
	if es[0].Line != 4 || es[0].Col != 3 || !strings.Contains(es[0].Msg, `duplicate key "bf16"`) {
		t.Errorf("first error = %v, want duplicate bf16 at 4:3", es[0])
	}
	if es[1].Line != 5 || es[1].Col != 37 || !strings.Contains(es[1].Msg, `duplicate key "stage"`) {
		t.Errorf("second error = %v, want duplicate stage at 5:37", es[1])
	}
}

func TestParseSyntaxErrors(t *testing.T) {
	cases := []struct {
		name, src string
		line, col int
		msg       string
	}{
		{"empty", "  \n ", 2, 2, "empty"},
		{"missing comma", "{\n  \"a\": 1\n  \"b\": 2\n}", 3, 3, "expected , or }"},
		{"unquoted key", "{\n  stage: 1\n}", 2, 3, "not quoted"},
		{"single quotes", "{'a': 1}", 1, 2, "double quotes"},
		{"python literal", "{\"a\": True}", 1, 7, "Python"},
		{"unterminated string", "{\"a\": \"abc\n}", 1, 7, "unterminated string"},
		{"unterminated object", "{\"a\": 1,", 1, 1, "unterminated object"},
		{"unterminated comment", "{\"a\": 1} /* x", 1, 10, "unterminated /* comment"},
		{"trailing garbage", "{} {}", 1, 4, "after the end"},
		{"top-level array", "[1, 2]", 1, 1, "JSON object"},
		{"leading zero", "{\"a\": 01}", 1, 7, "leading zeros"},
		{"bad escape", "{\"a\": \"\\x\"}", 1, 8, "invalid escape"},
		{"lone minus", "{\"a\": -}", 1, 8, "digits"},
		{"nan", "{\"a\": NaN}", 1, 7, "not a JSON number"},
		{"multibyte column", "{\"é\": ?}", 1, 7, "unexpected"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, es := parseCfg(t, tc.src, Options{Strict: true})
			if c != nil {
				t.Errorf("got a config for a syntax error")
			}
			if len(es) != 1 {
				t.Fatalf("got %d errors, want 1: %v", len(es), es)
			}
			e := es[0]
			if e.File != testFile || e.Line != tc.line || e.Col != tc.col || !strings.Contains(e.Msg, tc.msg) || e.Fix == "" {
				t.Errorf("got %q at %d:%d (fix %q), want %q at %d:%d with a fix", e.Msg, e.Line, e.Col, e.Fix, tc.msg, tc.line, tc.col)
			}
			containsAll(t, "Error()", e.Error(), testFile+":", "Fix:")
		})
	}
}

func TestParseDepthLimit(t *testing.T) {
	src := `{"amp": ` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + "}"
	_, es := parseCfg(t, src, Options{})
	if len(es) != 1 || !strings.Contains(es[0].Msg, "nested") {
		t.Fatalf("got %v, want one nesting error", es)
	}
}

// TestQuoteJSON: every string, control characters and Go-only escapes
// included, quotes to JSON that encoding/json reads back as the same text.
func TestQuoteJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "\x00\x01\x1f\x7f", "\a\v\f\b", `"quoted" \ back`, "\n\r\t", "😀 é \u2028\u2029", "zero_optimization"} {
		var got string
		if err := json.Unmarshal([]byte(quoteJSON(s)), &got); err != nil || got != s {
			t.Errorf("quoteJSON(%q) = %s: reads back %q, %v", s, quoteJSON(s), got, err)
		}
	}
}
