package cuda

import (
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/backendtest"
)

// The shared suite: every op against the float64 references, with finite
// differences on the odd shapes, every kernel running under emulation.
func TestBackendSuite(t *testing.T) {
	e := newEnv(t)
	backendtest.Run(t, func(t *testing.T) backend.Backend { return e.backend(t) })
}
