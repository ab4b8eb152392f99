package libsearch

import (
	"fmt"
	"strings"
)

// Outcomes of a candidate.
const (
	Loaded  = "loaded"  // this file is the library in use
	Failed  = "failed"  // dlopen, a symbol or the version check failed; Reason says which
	Skipped = "skipped" // never tried; Reason says why (Candidate.Skip)
	Unused  = "unused"  // not needed: an earlier candidate loaded
)

// Attempt is what became of one candidate.
type Attempt struct {
	Candidate
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	// Path is the file that loaded, symlinks resolved (a loader-path
	// soname resolved to its file), when Outcome is Loaded.
	Path string `json:"path,omitempty"`
}

// Result is one library's search: every candidate and its outcome, in the
// order tried.
type Result struct {
	Library string `json:"library"`
	// Override names the variable or option whose file was the only one
	// tried, if any.
	Override string `json:"override,omitempty"`
	// DriverCUDA is the driver version candidates were checked against (0:
	// unknown).
	DriverCUDA int       `json:"driver_cuda,omitempty"`
	Attempts   []Attempt `json:"candidates"`
}

// Chosen is the attempt that loaded, if any.
func (r Result) Chosen() (Attempt, bool) {
	for _, a := range r.Attempts {
		if a.Outcome == Loaded {
			return a, true
		}
	}
	return Attempt{}, false
}

// Summary says in one line why nothing loaded: every candidate with its
// reason, or that there were none.
func (r Result) Summary() string {
	if len(r.Attempts) == 0 {
		return "no candidate file found (searched the loader path, $CUDA_HOME, $CUDA_PATH, /usr/local/cuda*, $CONDA_PREFIX/lib and Python environments)"
	}
	parts := make([]string, 0, len(r.Attempts))
	for _, a := range r.Attempts {
		parts = append(parts, fmt.Sprintf("%s (%s): %s", a.Name, a.Source, a.Reason))
	}
	return "tried " + strings.Join(parts, "; ")
}

// Load tries spec's candidates in order with open, which loads one and
// returns the file that loaded (a soname resolved to its path, "" to
// keep Name) or why it cannot be used. An override (given, or spec.Env
// in the environment) is the only candidate when present: an override
// that fails must not quietly load another copy. ok says whether one
// loaded.
func (s *Searcher) Load(spec Spec, given, givenFrom string, open func(Candidate) (string, error)) (Result, bool) {
	r := Result{Library: spec.Name, DriverCUDA: s.opts.DriverCUDA}
	cands := []Candidate(nil)
	if o, ok := s.Override(spec, given, givenFrom); ok {
		r.Override = o.Source
		cands = []Candidate{o}
	} else {
		cands = s.Candidates(spec)
	}
	done := false
	for _, c := range cands {
		a := Attempt{Candidate: c}
		switch {
		case done:
			a.Outcome, a.Reason = Unused, "not needed: an earlier candidate loaded"
		case c.Skip != "":
			a.Outcome, a.Reason = Skipped, c.Skip
		default:
			path, err := open(c)
			if err != nil {
				a.Outcome, a.Reason = Failed, err.Error()
				break
			}
			a.Outcome, a.Path, done = Loaded, path, true
			if a.Path == "" {
				a.Path = c.Name
			}
		}
		r.Attempts = append(r.Attempts, a)
	}
	return r, done
}

// Error is a library that did not load: the search behind it, the
// sentinel it wraps (the loader's ErrNotAvailable) and what to install.
type Error struct {
	Result   Result
	Sentinel error
	Hint     string
}

func (e *Error) Error() string {
	over := ""
	if e.Result.Override != "" {
		over = " (from " + e.Result.Override + ")"
	}
	return fmt.Sprintf("%v: %s%s; %s", e.Sentinel, e.Result.Summary(), over, e.Hint)
}

func (e *Error) Unwrap() error { return e.Sentinel }
