package main

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestSignalDuringRendezvousExit: SIGTERM while the ranks wait for each
// other ended train with "context canceled" and exit status 1. It says it
// was stopped by SIGTERM during the rendezvous, keeps the detail, and exits
// 143 as after a save.
func TestSignalDuringRendezvousExit(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("terminated signal received")) // os/signal.NotifyContext's cause for SIGTERM
	detail := errors.New("rendezvous: rank 0 stopped waiting for all 2 ranks to join at 127.0.0.1:29500 after 3s: terminated signal received")
	err := interruptedExit(ctx, "during the rendezvous", detail)
	var st *stoppedError
	if !errors.As(err, &st) || st.ExitCode() != 143 {
		t.Fatalf("got %v, want a stop with exit status 143", err)
	}
	for _, want := range []string{"stopped by SIGTERM during the rendezvous", "nothing was trained or saved", detail.Error()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	// Not a signal: the error passes through.
	plain := errors.New("rendezvous: ranks [1] of 2 did not arrive within 30m0s")
	if got := interruptedExit(context.Background(), "during the rendezvous", plain); got != plain {
		t.Errorf("a rendezvous timeout became %v", got)
	}
}
