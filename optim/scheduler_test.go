package optim

import (
	"encoding/json"
	"math"
	"testing"
)

// The ref* functions transcribe the formulas of DeepSpeed's lr_schedules
// (as summarized in the project's DeepSpeed reference, §1.3) directly in
// float64, independently of the implementation. t is last_batch_iteration ≥ 0.

func refGamma(t, w int, linear bool) float64 {
	if linear {
		return float64(t) / float64(w)
	}
	return math.Log(float64(t)+1) / math.Log(float64(w))
}

func refWarmupLR(t int, minLR, maxLR float64, n int, linear bool) float64 {
	w := n
	if w < 2 {
		w = 2
	}
	gamma := 1.0
	if t < w {
		gamma = refGamma(t, w, linear)
	}
	return minLR + (maxLR-minLR)*gamma
}

func refWarmupDecayLR(t int, minLR, maxLR float64, n, total int, linear bool) float64 {
	w := n
	if w < 2 {
		w = 2
	}
	if t < w {
		return refWarmupLR(t, minLR, maxLR, n, linear)
	}
	gamma := math.Max(0, float64(total-t)/math.Max(1, float64(total-w)))
	return minLR + (maxLR-minLR)*gamma
}

func refWarmupCosineRatio(t, n, total int, wmin, cmin float64, linear bool) float64 {
	w := n
	if w < 2 {
		w = 2
	}
	if t < w {
		return wmin + (1-wmin)*refGamma(t, w, linear)
	}
	s := float64(t - w + 1)
	S := float64(total - w)
	return math.Max(0, cmin+(1-cmin)*(1+math.Cos(math.Pi*s/S))/2)
}

// refOneCycle returns lr and beta1 at t ≥ 0.
func refOneCycle(t int, p OneCycleParams) (lr, mom float64) {
	f := float64(p.CycleFirstStepSize)
	sec := f
	if p.CycleSecondStepSize != 0 {
		sec = float64(p.CycleSecondStepSize)
	}
	total := f + sec
	if float64(t) >= total {
		n := float64(t) - total + 1
		lr, mom = p.CycleMinLR, p.CycleMaxMom
		if p.DecayStepSize != 0 && p.DecayLRRate != 0 {
			lr = p.CycleMinLR / (1 + p.DecayLRRate*(n/float64(p.DecayStepSize)))
		}
		if p.DecayStepSize != 0 && p.DecayMomRate != 0 {
			mom = p.CycleMaxMom * (1 + p.DecayMomRate*(n/float64(p.DecayStepSize)))
		}
		return lr, mom
	}
	ratio := f / total
	i := float64(t + 1)
	c := math.Floor(1 + i/total)
	x := 1 + i/total - c
	var scale float64
	if x <= ratio {
		scale = x / ratio
	} else {
		scale = (x - 1) / (ratio - 1)
	}
	return p.CycleMinLR + (p.CycleMaxLR-p.CycleMinLR)*scale, p.CycleMaxMom - (p.CycleMaxMom-p.CycleMinMom)*scale
}

func refLRRange(t int, minLR float64, size int, rate float64, stair bool) float64 {
	k := float64(t+1) / float64(size)
	if stair {
		k = math.Floor(k)
	}
	return minLR * (1 + rate*k)
}

func closeTo(got, want float64) bool {
	return math.Abs(got-want) <= 1e-12*math.Max(1, math.Abs(want))
}

// at returns a scheduler advanced to last_batch_iteration t by Step calls.
func at[S Scheduler](s S, t int) S {
	for range t + 1 {
		s.Step()
	}
	return s
}

// boundaries are the t values where the schedules change shape: -1, 0, 1,
// W-1, W, W+1, T-1, T, T+5, without duplicates or values below -1.
func boundaries(w, total int) []int {
	seen := map[int]bool{}
	var ts []int
	for _, t := range []int{-1, 0, 1, w - 1, w, w + 1, total - 1, total, total + 5} {
		if t >= -1 && !seen[t] {
			seen[t] = true
			ts = append(ts, t)
		}
	}
	return ts
}

func TestWarmupLRMatchesFormula(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		typ  string
	}{
		{"log W=10", 10, WarmupLog},
		{"linear W=10", 10, WarmupLinear},
		{"empty type is log", 7, ""},
		{"W=0 acts as 2", 0, WarmupLinear},
		{"W=1 acts as 2 log", 1, WarmupLog},
		{"default W=1000", 1000, WarmupLog},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := WarmupLRParams{WarmupMinLR: 1e-5, WarmupMaxLR: 3e-4, WarmupNumSteps: tc.n, WarmupType: tc.typ}
			linear := tc.typ == WarmupLinear
			w := max(2, tc.n)
			for _, it := range boundaries(w, 3*w) {
				s, err := NewWarmupLR(p)
				if err != nil {
					t.Fatal(err)
				}
				at(s, it)
				want := p.WarmupMinLR // start value before the first step
				if it >= 0 {
					want = refWarmupLR(it, p.WarmupMinLR, p.WarmupMaxLR, tc.n, linear)
				}
				if got := s.LR(123); !closeTo(got, want) {
					t.Errorf("t=%d: lr %.17g, want %.17g", it, got, want)
				}
				if _, _, ok := s.Momentum(); ok {
					t.Errorf("t=%d: WarmupLR reports momentum", it)
				}
			}
		})
	}
}

// TestWarmupLRHandValues pins a few values computed by hand from the
// formulas, so a mistake shared by reference and implementation shows.
func TestWarmupLRHandValues(t *testing.T) {
	lin, _ := NewWarmupLR(WarmupLRParams{WarmupMinLR: 0, WarmupMaxLR: 1, WarmupNumSteps: 4, WarmupType: WarmupLinear})
	lg, _ := NewWarmupLR(WarmupLRParams{WarmupMinLR: 0, WarmupMaxLR: 1, WarmupNumSteps: 4, WarmupType: WarmupLog})
	// linear: t/4 for t < 4; log: log(t+1)/log 4, so t=1 → 0.5, t=3 → 1.
	wantLin := []float64{0, 0, 0.25, 0.5, 0.75, 1, 1}
	wantLog := []float64{0, 0, 0.5, math.Log(3) / math.Log(4), 1, 1, 1}
	for i := range wantLin {
		if got := lin.LR(0); !closeTo(got, wantLin[i]) {
			t.Errorf("linear t=%d: %g, want %g", i-1, got, wantLin[i])
		}
		if got := lg.LR(0); !closeTo(got, wantLog[i]) {
			t.Errorf("log t=%d: %g, want %g", i-1, got, wantLog[i])
		}
		lin.Step()
		lg.Step()
	}
}

func TestWarmupDecayLRMatchesFormula(t *testing.T) {
	for _, tc := range []struct {
		name     string
		n, total int
		typ      string
	}{
		{"log", 10, 50, WarmupLog},
		{"linear", 10, 50, WarmupLinear},
		{"T < W", 10, 6, WarmupLinear},
		{"T = W", 10, 10, WarmupLog},
		{"T = W+1", 10, 11, WarmupLog},
		{"W=1 acts as 2", 1, 8, WarmupLinear},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := WarmupDecayLRParams{
				WarmupLRParams: WarmupLRParams{WarmupMinLR: 2e-5, WarmupMaxLR: 6e-4, WarmupNumSteps: tc.n, WarmupType: tc.typ},
				TotalNumSteps:  tc.total,
			}
			for _, it := range boundaries(max(2, tc.n), tc.total) {
				s, err := NewWarmupDecayLR(p)
				if err != nil {
					t.Fatal(err)
				}
				at(s, it)
				want := p.WarmupMinLR
				if it >= 0 {
					want = refWarmupDecayLR(it, p.WarmupMinLR, p.WarmupMaxLR, tc.n, tc.total, tc.typ == WarmupLinear)
				}
				if got := s.LR(1); !closeTo(got, want) {
					t.Errorf("t=%d: lr %.17g, want %.17g", it, got, want)
				}
			}
		})
	}
	// By hand: min 0, max 1, linear W=2, T=6: t=2..6 → (6−t)/4, then 0.
	s, _ := NewWarmupDecayLR(WarmupDecayLRParams{WarmupLRParams: WarmupLRParams{WarmupMaxLR: 1, WarmupNumSteps: 2, WarmupType: WarmupLinear}, TotalNumSteps: 6})
	want := []float64{0, 0, 0.5, 1, 0.75, 0.5, 0.25, 0, 0, 0}
	for i, w := range want {
		if got := s.LR(0); !closeTo(got, w) {
			t.Errorf("hand t=%d: %g, want %g", i-1, got, w)
		}
		s.Step()
	}
}

func TestWarmupCosineLRMatchesFormula(t *testing.T) {
	const base = 6e-4
	for _, tc := range []struct {
		name       string
		n, total   int
		wmin, cmin float64
		typ        string
	}{
		{"log defaults", 10, 50, 0, 0.0001, WarmupLog},
		{"linear", 10, 50, 0.1, 0.05, WarmupLinear},
		{"T = W+1", 5, 6, 0, 0.0001, WarmupLog},
		{"W=0 acts as 2", 0, 9, 0.2, 0, WarmupLinear},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := WarmupCosineLRParams{TotalNumSteps: tc.total, WarmupMinRatio: tc.wmin, WarmupNumSteps: tc.n,
				CosMinRatio: tc.cmin, WarmupType: tc.typ}
			for _, it := range boundaries(max(2, tc.n), tc.total) {
				s, err := NewWarmupCosineLR(p)
				if err != nil {
					t.Fatal(err)
				}
				at(s, it)
				want := 0.0 // DeepSpeed starts WarmupCosineLR at lr 0
				if it >= 0 {
					want = base * refWarmupCosineRatio(it, tc.n, tc.total, tc.wmin, tc.cmin, tc.typ == WarmupLinear)
				}
				if got := s.LR(base); !closeTo(got, want) {
					t.Errorf("t=%d: lr %.17g, want %.17g", it, got, want)
				}
			}
		})
	}
	// By hand: W=2 linear, T=6, wmin 0, cmin 0: S=4, t=2..5 → s=1..4,
	// (1+cos(πs/4))/2 = 0.8536, 0.5, 0.1464, 0; t=6 → s=5 rises to 0.1464.
	s, _ := NewWarmupCosineLR(WarmupCosineLRParams{TotalNumSteps: 6, WarmupNumSteps: 2, WarmupType: WarmupLinear})
	h := (1 + math.Sqrt2/2) / 2
	want := []float64{0, 0, 0.5, h, 0.5, 1 - h, 0, 1 - h}
	for i, w := range want {
		if got := s.LR(1); !closeTo(got, w) {
			t.Errorf("hand t=%d: %g, want %g", i-1, got, w)
		}
		s.Step()
	}
}

func TestOneCycleMatchesFormula(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    OneCycleParams
	}{
		{"symmetric, no decay", OneCycleParams{CycleMinLR: 1e-4, CycleMaxLR: 1e-3, CycleFirstStepSize: 5,
			CycleMomentum: true, CycleMinMom: 0.85, CycleMaxMom: 0.95}},
		{"asymmetric with decay", OneCycleParams{CycleMinLR: 2e-4, CycleMaxLR: 4e-3, CycleFirstStepSize: 3,
			CycleSecondStepSize: 7, DecayLRRate: 0.5, DecayStepSize: 2, CycleMomentum: true, CycleMinMom: 0.8,
			CycleMaxMom: 0.9, DecayMomRate: 0.01}},
		{"decay step size 0 disables decay", OneCycleParams{CycleMinLR: 1e-4, CycleMaxLR: 1e-3, CycleFirstStepSize: 4,
			DecayLRRate: 0.5, DecayMomRate: 0.1, CycleMomentum: true, CycleMinMom: 0.8, CycleMaxMom: 0.9}},
		{"lr decay only", OneCycleParams{CycleMinLR: 1e-4, CycleMaxLR: 1e-3, CycleFirstStepSize: 4,
			DecayLRRate: 0.5, DecayStepSize: 3, CycleMomentum: true, CycleMinMom: 0.8, CycleMaxMom: 0.9}},
		{"no momentum", OneCycleParams{CycleMinLR: 1e-4, CycleMaxLR: 1e-3, CycleFirstStepSize: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.p.CycleFirstStepSize
			total := f + f
			if tc.p.CycleSecondStepSize != 0 {
				total = f + tc.p.CycleSecondStepSize
			}
			ts := boundaries(f, total)
			for it := -1; it < total+8; it++ {
				ts = append(ts, it)
			}
			for _, it := range ts {
				s, err := NewOneCycle(tc.p)
				if err != nil {
					t.Fatal(err)
				}
				at(s, it)
				wantLR, wantMom := tc.p.CycleMinLR, tc.p.CycleMinMom // start: DeepSpeed's constructor writes min_mom
				if it >= 0 {
					wantLR, wantMom = refOneCycle(it, tc.p)
				}
				if got := s.LR(1); !closeTo(got, wantLR) {
					t.Errorf("t=%d: lr %.17g, want %.17g", it, got, wantLR)
				}
				b1, b2, ok := s.Momentum()
				if ok != tc.p.CycleMomentum {
					t.Fatalf("t=%d: momentum ok=%v, want %v", it, ok, tc.p.CycleMomentum)
				}
				if ok && (!closeTo(b1, wantMom) || b2 != 0.99) {
					t.Errorf("t=%d: betas (%.17g, %g), want (%.17g, 0.99)", it, b1, b2, wantMom)
				}
			}
		})
	}
}

func TestOneCycleHandValues(t *testing.T) {
	// f = s = 2, so t = 0..3 is at scale .5, 1, .5, 0: lr = 0.1 + 0.9·scale,
	// beta1 = 0.9 − 0.1·scale; before the first step (0.1, 0.8).
	p := OneCycleParams{CycleMinLR: 0.1, CycleMaxLR: 1, CycleFirstStepSize: 2, DecayLRRate: 1, DecayStepSize: 1,
		CycleMomentum: true, CycleMinMom: 0.8, CycleMaxMom: 0.9, DecayMomRate: 0.1}
	s, err := NewOneCycle(p)
	if err != nil {
		t.Fatal(err)
	}
	// After the cycle (t ≥ 4), n = t−3: lr = 0.1/(1+n), mom = 0.9·(1+0.1n).
	wantLR := []float64{0.1, 0.55, 1, 0.55, 0.1, 0.1 / 2, 0.1 / 3}
	wantMom := []float64{0.8, 0.85, 0.8, 0.85, 0.9, 0.9 * 1.1, 0.9 * 1.2}
	for i := range wantLR {
		b1, _, _ := s.Momentum()
		if got := s.LR(0); !closeTo(got, wantLR[i]) || !closeTo(b1, wantMom[i]) {
			t.Errorf("t=%d: lr %g beta1 %g, want %g %g", i-1, got, b1, wantLR[i], wantMom[i])
		}
		s.Step()
	}
}

func TestLRRangeTestMatchesFormula(t *testing.T) {
	for _, stair := range []bool{false, true} {
		p := LRRangeTestParams{MinLR: 1e-4, StepSize: 5, StepRate: 0.7, Staircase: stair}
		for it := -1; it < 25; it++ {
			s, err := NewLRRangeTest(p)
			if err != nil {
				t.Fatal(err)
			}
			at(s, it)
			want := refLRRange(it, p.MinLR, p.StepSize, p.StepRate, stair) // also min_lr at t = -1
			if got := s.LR(1); !closeTo(got, want) {
				t.Errorf("staircase=%v t=%d: lr %.17g, want %.17g", stair, it, got, want)
			}
		}
	}
	// By hand: min 1, size 2, rate 1: continuous 1, 1.5, 2, 2.5; staircase 1, 1, 2, 2.
	c, _ := NewLRRangeTest(LRRangeTestParams{MinLR: 1, StepSize: 2, StepRate: 1})
	st, _ := NewLRRangeTest(LRRangeTestParams{MinLR: 1, StepSize: 2, StepRate: 1, Staircase: true})
	for i, w := range [][2]float64{{1, 1}, {1.5, 1}, {2, 2}, {2.5, 2}} {
		if c.LR(0) != w[0] || st.LR(0) != w[1] {
			t.Errorf("hand t=%d: %g %g, want %g %g", i-1, c.LR(0), st.LR(0), w[0], w[1])
		}
		c.Step()
		st.Step()
	}
}

func TestConstant(t *testing.T) {
	s := NewConstant()
	for range 3 {
		if s.LR(3e-4) != 3e-4 {
			t.Fatalf("Constant LR %g, want 3e-4", s.LR(3e-4))
		}
		s.Step()
	}
	if got := s.State().LastBatchIteration; got != 2 {
		t.Errorf("last_batch_iteration %d after 3 steps, want 2", got)
	}
}

// TestTimingRule checks the sequence of rates that optimizer steps 1..n see
// in a trainer loop (read LR, update, Step unless skipped): step k runs with
// t = k−2 and step 1 with the start value; a skipped step does not advance.
func TestTimingRule(t *testing.T) {
	// WarmupLR linear W=4, 0→1: t=-1,0,1,… gives 0, 0, .25, .5, .75, 1.
	s, _ := NewWarmupLR(WarmupLRParams{WarmupMaxLR: 1, WarmupNumSteps: 4, WarmupType: WarmupLinear})
	skip := []bool{false, false, true, false, true, true, false, false, false}
	want := []float64{0, 0, 0.25, 0.25, 0.5, 0.5, 0.5, 0.75, 1}
	for k := range skip {
		if got := s.LR(0); !closeTo(got, want[k]) {
			t.Errorf("optimizer step %d: lr %g, want %g", k+1, got, want[k])
		}
		if !skip[k] {
			s.Step()
		}
	}

	// Without skips, step k sees the value at t = k−2 for every scheduler.
	oc, _ := NewOneCycle(oneCycle(1e-4, 1e-3))
	ocp := oneCycle(1e-4, 1e-3)
	for k := 1; k <= 50; k++ {
		want, wantMom := 1e-4, 0.8
		if k >= 2 {
			want, wantMom = refOneCycle(k-2, ocp)
		}
		b1, b2, _ := oc.Momentum()
		if got := oc.LR(0); !closeTo(got, want) || !closeTo(b1, wantMom) || b2 != 0.99 {
			t.Errorf("OneCycle step %d: lr %g betas (%g, %g), want %g (%g, 0.99)", k, got, b1, b2, want, wantMom)
		}
		oc.Step()
	}
}

func TestSchedulerStateRoundTrip(t *testing.T) {
	mk := map[string]func() Scheduler{
		"WarmupLR": func() Scheduler {
			s, _ := NewWarmupLR(WarmupLRParams{WarmupMinLR: 1e-5, WarmupMaxLR: 1e-3, WarmupNumSteps: 7})
			return s
		},
		"WarmupDecayLR": func() Scheduler {
			s, _ := NewWarmupDecayLR(WarmupDecayLRParams{WarmupLRParams: WarmupLRParams{WarmupMaxLR: 1e-3, WarmupNumSteps: 5, WarmupType: WarmupLinear}, TotalNumSteps: 20})
			return s
		},
		"WarmupCosineLR": func() Scheduler {
			s, _ := NewWarmupCosineLR(WarmupCosineLRParams{TotalNumSteps: 20, WarmupNumSteps: 5, CosMinRatio: 0.1})
			return s
		},
		"OneCycle": func() Scheduler {
			p := oneCycle(1e-4, 1e-3)
			p.CycleFirstStepSize, p.DecayStepSize, p.DecayLRRate = 4, 2, 0.3
			s, _ := NewOneCycle(p)
			return s
		},
		"LRRangeTest": func() Scheduler {
			s, _ := NewLRRangeTest(LRRangeTestParams{MinLR: 1e-4, StepSize: 3, StepRate: 2})
			return s
		},
		"Constant": func() Scheduler { return NewConstant() },
	}
	for name, newS := range mk {
		t.Run(name, func(t *testing.T) {
			a := newS()
			for range 6 {
				a.Step()
			}
			st := a.State()
			if st.LastBatchIteration != 5 {
				t.Fatalf("last_batch_iteration %d after 6 steps, want 5", st.LastBatchIteration)
			}
			js, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			if string(js) != `{"last_batch_iteration":5}` {
				t.Errorf("state JSON %s, want DeepSpeed's {\"last_batch_iteration\":5}", js)
			}
			var back SchedulerState
			if err := json.Unmarshal(js, &back); err != nil {
				t.Fatal(err)
			}
			b := newS()
			if err := b.Restore(back); err != nil {
				t.Fatal(err)
			}
			for i := range 20 {
				la, lb := a.LR(2e-3), b.LR(2e-3)
				ma1, ma2, mok := a.Momentum()
				mb1, mb2, nok := b.Momentum()
				if la != lb || ma1 != mb1 || ma2 != mb2 || mok != nok {
					t.Fatalf("after restore, step %d: lr %g vs %g, betas (%g,%g) vs (%g,%g)", i, la, lb, ma1, ma2, mb1, mb2)
				}
				a.Step()
				b.Step()
			}
			if err := b.Restore(SchedulerState{LastBatchIteration: -2}); err == nil {
				t.Error("Restore(-2) succeeded, want an error")
			}
			if err := b.Restore(SchedulerState{LastBatchIteration: -1}); err != nil {
				t.Errorf("Restore(-1): %v", err)
			}
		})
	}
}

func TestSchedulerParamErrors(t *testing.T) {
	if _, err := NewWarmupLR(WarmupLRParams{WarmupNumSteps: 10, WarmupType: "cosine"}); err == nil {
		t.Error("unknown warmup_type accepted")
	}
	if _, err := NewWarmupDecayLR(WarmupDecayLRParams{WarmupLRParams: WarmupLRParams{WarmupMaxLR: 0.001, WarmupNumSteps: 1000}}); err == nil {
		t.Error("WarmupDecayLR without total_num_steps accepted")
	}
	if _, err := NewWarmupCosineLR(WarmupCosineLRParams{TotalNumSteps: 1000, WarmupNumSteps: 1000}); err == nil {
		t.Error("WarmupCosineLR with T = W accepted")
	}
	if _, err := NewWarmupCosineLR(WarmupCosineLRParams{TotalNumSteps: 2, WarmupNumSteps: 0}); err == nil {
		t.Error("WarmupCosineLR with T = max(2, W) accepted")
	}
	if _, err := NewWarmupCosineLR(WarmupCosineLRParams{TotalNumSteps: 10, WarmupNumSteps: 5, WarmupType: "exp"}); err == nil {
		t.Error("WarmupCosineLR with unknown warmup_type accepted")
	}
	p := oneCycle(1e-4, 1e-3)
	p.CycleFirstStepSize = 0
	if _, err := NewOneCycle(p); err == nil {
		t.Error("OneCycle with cycle_first_step_size 0 accepted")
	}
	if _, err := NewLRRangeTest(LRRangeTestParams{MinLR: 1, StepSize: 0}); err == nil {
		t.Error("LRRangeTest with step size 0 accepted")
	}
}

// oneCycle is OneCycle with DeepSpeed's defaults (first step size 2000,
// cycle_momentum between 0.8 and 0.9, no decay) and the two required rates.
func oneCycle(minLR, maxLR float64) OneCycleParams {
	return OneCycleParams{CycleMinLR: minLR, CycleMaxLR: maxLR, CycleFirstStepSize: 2000, CycleMomentum: true,
		CycleMinMom: 0.8, CycleMaxMom: 0.9}
}
