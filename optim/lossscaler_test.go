package optim

import (
	"errors"
	"strings"
	"testing"
)

// run feeds an overflow pattern to s and checks the scale and skip after
// every update against a trace worked out by hand from DeepSpeed's rules.
func run(t *testing.T, s *LossScaler, pattern []bool, wantScale []float64) {
	t.Helper()
	for i, of := range pattern {
		skipped, err := s.Update(of)
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		if skipped != of {
			t.Errorf("update %d: skipped %v, want %v", i, skipped, of)
		}
		if got := s.Scale(); got != wantScale[i] {
			t.Errorf("update %d (overflow %v): scale %g, want %g", i, of, got, wantScale[i])
		}
	}
}

const (
	o = true  // overflow
	c = false // clean step
)

// Window 3, hysteresis 2, start 16, min 1.
var scalerPattern = []bool{c, c, c, o, o, o, c, c, c, o, c, o}

func TestLossScalerTrace(t *testing.T) {
	cfg := LossScalerConfig{InitialScalePower: 4, LossScaleWindow: 3, Hysteresis: 2, MinLossScale: 1}
	var logs []string
	s, err := NewLossScaler(cfg, 0, func(m string) { logs = append(logs, m) })
	if err != nil {
		t.Fatal(err)
	}
	// iter 0,1: (iter+1)%3 ≠ 0; iter 2: 3%3 = 0 → 32.
	// iter 3: overflow, hysteresis 2 → 1, scale kept. iter 4, 5: hysteresis 1 → halve: 16, 8.
	// iter 6,7: (iter−5)%3 ≠ 0, hysteresis stays 1; iter 8: → 16, hysteresis refilled to 2.
	// iter 9: overflow, hysteresis 2 → 1. iter 10: clean, (10−9)%3 ≠ 0, hysteresis stays 1.
	// iter 11: overflow with hysteresis 1 → 8.
	run(t, s, scalerPattern, []float64{16, 16, 32, 32, 16, 8, 8, 8, 16, 16, 16, 8})
	wantLogs := []string{
		"[gotrain] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 32, but hysteresis is 2. Reducing hysteresis to 1",
		"[gotrain] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 32, reducing to 16",
		"[gotrain] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 16, reducing to 8",
		"[gotrain] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 16, but hysteresis is 2. Reducing hysteresis to 1",
		"[gotrain] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 16, reducing to 8",
	}
	if strings.Join(logs, "\n") != strings.Join(wantLogs, "\n") {
		t.Errorf("log lines:\n%s\nwant:\n%s", strings.Join(logs, "\n"), strings.Join(wantLogs, "\n"))
	}
	if st := s.State(); st != (LossScalerState{CurScale: 8, CurIter: 12, LastOverflowIter: 11, CurHysteresis: 1}) {
		t.Errorf("final state %+v", st)
	}
}

func TestLossScalerConsecutiveHysteresis(t *testing.T) {
	cfg := LossScalerConfig{InitialScalePower: 4, LossScaleWindow: 3, Hysteresis: 2, ConsecutiveHysteresis: true, MinLossScale: 1}
	s, err := NewLossScaler(cfg, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Same as the plain trace up to iter 9, but the clean iter 10 refills
	// hysteresis to 2, so the overflow at iter 11 only decrements it.
	run(t, s, scalerPattern, []float64{16, 16, 32, 32, 16, 8, 8, 8, 16, 16, 16, 16})
	if h := s.State().CurHysteresis; h != 1 {
		t.Errorf("hysteresis %d at the end, want 1", h)
	}
}

func TestLossScalerHysteresisOne(t *testing.T) {
	// hysteresis 1: every overflow halves; window 2 doubles after 2 clean steps.
	cfg := LossScalerConfig{InitialScalePower: 3, LossScaleWindow: 2, Hysteresis: 1, MinLossScale: 1}
	s, _ := NewLossScaler(cfg, 0, nil)
	// iter0 clean: 1%2 ≠ 0 → 8; iter1 clean: 2%2 = 0 → 16; iter2 o → 8;
	// iter3 o → 4; iter4 clean: 1 → 4; iter5 clean: 2 → 8; iter6 clean: 3 → 8; iter7 clean: 4 → 16.
	run(t, s, []bool{c, c, o, o, c, c, c, c}, []float64{8, 16, 8, 4, 4, 8, 8, 16})
}

func TestLossScalerDefaultsDoubleAfterWindow(t *testing.T) {
	s, err := NewLossScaler(documentedScaler(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Scale() != 65536 || !s.Dynamic() {
		t.Fatalf("default scale %g dynamic %v, want 2^16 dynamic", s.Scale(), s.Dynamic())
	}
	for i := range 999 {
		if _, err := s.Update(false); err != nil || s.Scale() != 65536 {
			t.Fatalf("clean update %d: scale %g err %v, want 65536 until the 1000th", i, s.Scale(), err)
		}
	}
	s.Update(false)
	if s.Scale() != 131072 {
		t.Errorf("after 1000 clean updates: %g, want 131072", s.Scale())
	}
}

func TestLossScalerAtMinimum(t *testing.T) {
	// Start 4, min 3, hysteresis 1: overflow → max(2, 3) = 3; overflow again → error.
	cfg := LossScalerConfig{InitialScalePower: 2, LossScaleWindow: 100, Hysteresis: 1, MinLossScale: 3}
	var logs []string
	s, _ := NewLossScaler(cfg, 2, func(m string) { logs = append(logs, m) })
	if skipped, err := s.Update(true); !skipped || err != nil || s.Scale() != 3 {
		t.Fatalf("first overflow: skipped %v err %v scale %g, want true nil 3", skipped, err, s.Scale())
	}
	if len(logs) != 1 || logs[0] != "[gotrain] OVERFLOW! Rank 2 Skipping step. Attempted loss scale: 4, reducing to 3" {
		t.Errorf("log %q", logs)
	}
	skipped, err := s.Update(true)
	if !skipped || err == nil {
		t.Fatalf("overflow at minimum: skipped %v err %v, want true and an error", skipped, err)
	}
	var atMin *LossScaleAtMinimumError
	if !errors.As(err, &atMin) || atMin.MinLossScale != 3 {
		t.Errorf("error %v is not a LossScaleAtMinimumError for min 3", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.") ||
		!strings.Contains(msg, "bf16") {
		t.Errorf("error message %q lacks DeepSpeed's text or the advice", msg)
	}
	if s.Scale() != 3 {
		t.Errorf("scale moved to %g on the failing update", s.Scale())
	}

	// With hysteresis left, an overflow at the minimum only uses it up.
	cfg.Hysteresis = 2
	cfg.InitialScalePower = 0
	cfg.MinLossScale = 1
	s, _ = NewLossScaler(cfg, 0, nil)
	if _, err := s.Update(true); err != nil {
		t.Errorf("overflow at minimum with hysteresis 2: %v, want a decrement", err)
	}
	if _, err := s.Update(true); err == nil {
		t.Error("second overflow at minimum: no error")
	}
}

func TestLossScalerStatic(t *testing.T) {
	var logs []string
	s, err := NewLossScaler(LossScalerConfig{LossScale: 128}, 0, func(m string) { logs = append(logs, m) })
	if err != nil {
		t.Fatal(err)
	}
	if s.Dynamic() {
		t.Error("loss_scale 128 is dynamic")
	}
	run(t, s, []bool{c, o, o, o, c, c}, []float64{128, 128, 128, 128, 128, 128})
	if len(logs) != 3 {
		t.Errorf("%d overflow log lines, want 3", len(logs))
	}
}

func TestLossScalerStateRoundTrip(t *testing.T) {
	cfg := LossScalerConfig{InitialScalePower: 4, LossScaleWindow: 3, Hysteresis: 2, MinLossScale: 1}
	want := []float64{16, 16, 32, 32, 16, 8, 8, 8, 16, 16, 16, 8}
	a, _ := NewLossScaler(cfg, 0, nil)
	run(t, a, scalerPattern[:7], want[:7])
	b, _ := NewLossScaler(cfg, 0, nil)
	if err := b.Restore(a.State()); err != nil {
		t.Fatal(err)
	}
	run(t, b, scalerPattern[7:], want[7:])

	for _, bad := range []LossScalerState{
		{CurScale: 0, CurIter: 1, LastOverflowIter: -1, CurHysteresis: 1},
		{CurScale: 8, CurIter: 3, LastOverflowIter: 3, CurHysteresis: 1},
		{CurScale: 8, CurIter: -1, LastOverflowIter: -1, CurHysteresis: 1},
		{CurScale: 8, CurIter: 3, LastOverflowIter: -1, CurHysteresis: 0},
		{CurScale: 8, CurIter: 3, LastOverflowIter: -1, CurHysteresis: 3},
	} {
		if err := b.Restore(bad); err == nil {
			t.Errorf("Restore(%+v) accepted", bad)
		}
	}
}

func TestLossScalerConfigErrors(t *testing.T) {
	for name, mut := range map[string]func(*LossScalerConfig){
		"window 0":        func(c *LossScalerConfig) { c.LossScaleWindow = 0 },
		"hysteresis 0":    func(c *LossScalerConfig) { c.Hysteresis = 0 },
		"min 0":           func(c *LossScalerConfig) { c.MinLossScale = 0 },
		"power -1":        func(c *LossScalerConfig) { c.InitialScalePower = -1 },
		"power 127":       func(c *LossScalerConfig) { c.InitialScalePower = 127 },
		"static negative": func(c *LossScalerConfig) { c.LossScale = -2 },
	} {
		cfg := documentedScaler()
		mut(&cfg)
		if _, err := NewLossScaler(cfg, 0, nil); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

// documentedScaler is DeepSpeed's documented fp16 defaults: dynamic from
// 2^16, window 1000, hysteresis 2, minimum 1.
func documentedScaler() LossScalerConfig {
	return LossScalerConfig{InitialScalePower: 16, LossScaleWindow: 1000, Hysteresis: 2, MinLossScale: 1}
}
