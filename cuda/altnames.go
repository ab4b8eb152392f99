package cuda

/*
#include "gt_dl.h"
#include "gt_cuda.h"
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"
)

// alternates are the entry points whose exported name depends on the
// driver release: each is bound to the first of its names the library
// has, the newest first, and all of a symbol's names share one prototype.
// cuEventElapsedTime_v2 arrived in 12.8 and is the only name the CUDA 13.0
// header declares; older drivers have only the plain name.
//
// A _vN name is listed here only when its prototype is the plain one's:
// 13.0's cuCtxSynchronize_v2 and cuCtxGetDevice_v2, for one, take a
// context the plain calls do not, and are different calls.
func (s *symbols) alternates() []struct {
	names []string
	dst   *unsafe.Pointer
} {
	return []struct {
		names []string
		dst   *unsafe.Pointer
	}{
		{[]string{"cuEventElapsedTime_v2", "cuEventElapsedTime"}, &s.eventElapsedTime},
	}
}

// resolveAlternates binds every alternate and returns, for each the
// library lacks under all its names, those names joined by " or ", so the
// error says every name that would have done.
func (s *symbols) resolveAlternates(lib *C.gt_dl_lib) (missing []string) {
	for _, a := range s.alternates() {
		for _, name := range a.names {
			if *a.dst = lookup(lib, name); *a.dst != nil {
				break
			}
		}
		if *a.dst == nil {
			missing = append(missing, strings.Join(a.names, " or "))
		}
	}
	return missing
}

// missingDetail says what the loaded library lacks and, when it can tell,
// which CUDA release the driver is for: a driver older than a symbol needs
// upgrading, while a symbol missing from a new driver is one gotrain must
// stop using.
func (d *Driver) missingDetail(missing []string) string {
	what := d.path
	if d.sym.driverGetVersion != nil {
		var v C.int
		if C.gt_cuDriverGetVersion(d.sym.driverGetVersion, &v) == C.CUDA_SUCCESS {
			what += fmt.Sprintf(" (a driver for CUDA %d.%d)", int(v)/1000, int(v)%1000/10)
		}
	}
	return fmt.Sprintf("%s lacks %s (driver too old?)", what, strings.Join(missing, ", "))
}
