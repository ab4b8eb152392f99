package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gotrain/gotrain/cublas"
	"github.com/gotrain/gotrain/internal/libsearch"
	"github.com/gotrain/gotrain/kernels"
	"github.com/gotrain/gotrain/metrics"
	"github.com/gotrain/gotrain/nccl"
)

// failed fills lib from a loader's error: the text, and the search and
// the fix behind it when the error has them.
func (lib *doctorLib) failed(err error) {
	lib.Err = err.Error()
	var se *libsearch.Error
	if errors.As(err, &se) {
		lib.Search, lib.Fix = &se.Result, se.Hint
	}
}

// doctorNVRTC loads NVRTC, which compiles gotrain's kernels at run time.
func doctorNVRTC(search *libsearch.Searcher) doctorLib {
	lib := doctorLib{Name: "nvrtc"}
	n, err := kernels.LoadNVRTC(kernels.NVRTCOptions{Search: search})
	if err != nil {
		lib.failed(err)
		return lib
	}
	r := n.Search()
	lib.Version, lib.Path, lib.Search = n.VersionString(), n.Path(), &r
	if archs := n.SupportedArchs(); len(archs) > 0 {
		lib.Version += fmt.Sprintf(", targets %s..%s", archs[0], archs[len(archs)-1])
	}
	return lib
}

// doctorCUBLAS loads cuBLAS, and cuBLASLt beside it (the fused-epilogue
// GEMMs use it), as training would. Loading needs no GPU, so a machine with
// the libraries but no device still reports their versions.
func doctorCUBLAS(search *libsearch.Searcher) doctorLib {
	lib := doctorLib{Name: "cublas"}
	l, err := cublas.Load(cublas.LoadOptions{Search: search})
	if err != nil {
		lib.failed(err)
		return lib
	}
	r := l.Search()
	lib.Version, lib.Path, lib.Search = l.Version().String(), l.Path(), &r
	if lt, err := l.LoadLt(cublas.LoadOptions{Search: search}); err != nil {
		lib.Err = err.Error()
	} else {
		lib.Version += ", cuBLASLt " + lt.Version().String()
	}
	return lib
}

// doctorNCCL loads NCCL and says whether it is new enough for bf16
// gradients and the avg reduction (2.10.3).
func doctorNCCL(search *libsearch.Searcher) doctorLib {
	lib := doctorLib{Name: "nccl"}
	l, err := nccl.Load(nccl.LoadOptions{Search: search})
	if err != nil {
		lib.failed(err)
		return lib
	}
	r := l.Search()
	lib.Version, lib.Path, lib.Search = l.Version().String(), l.Path(), &r
	if !l.Version().AtLeast(2, 10, 3) {
		lib.Err = "NCCL " + lib.Version + " predates 2.10.3: bf16 collectives and the avg reduction are unavailable; install libnccl2 2.10.3 or later"
	}
	return lib
}

// doctorNVML is where NVML was looked for; the report itself is
// doctorReport.NVML.
func doctorNVML(search *libsearch.Searcher) doctorLib {
	lib := doctorLib{Name: "nvml"}
	_, r, err := metrics.FindNVML(search)
	if err != nil {
		lib.failed(err)
	}
	lib.Search = &r
	if ch, ok := r.Chosen(); ok {
		lib.Path = ch.Path
	}
	return lib
}

// printSearch lists a library's candidates under its line: the file that
// loaded and why each other one was not taken.
func printSearch(w io.Writer, r *libsearch.Result) {
	if r == nil {
		return
	}
	if r.Override != "" {
		fmt.Fprintf(w, "%-12s   only the file %s names is tried\n", "", r.Override)
	}
	for _, a := range r.Attempts {
		where := a.Source
		if a.Major > 0 {
			where = fmt.Sprintf("CUDA %d, %s", a.Major, a.Source)
		}
		line := fmt.Sprintf("%-12s   %-7s %s (%s)", "", a.Outcome, a.Name, where)
		switch a.Outcome {
		case libsearch.Loaded:
			if a.Path != a.Name {
				line += " → " + a.Path
			}
		case libsearch.Failed, libsearch.Skipped:
			line += ": " + strings.TrimPrefix(a.Reason, a.Name+": ")
		}
		fmt.Fprintln(w, line)
	}
}
