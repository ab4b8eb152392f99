package comm

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestPeerLostWordsSilenceAsNotResponding: a peer that went silent (no
// data, no heartbeat) may be stopped by SIGSTOP rather than dead, so the
// message says so; a closed connection still reads as a dead process. The
// rank that hears of the loss from another gets the reason as text and
// words it the same.
func TestPeerLostWordsSilenceAsNotResponding(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"silent", &PeerSilentError{Silence: 10 * time.Second}, "not responding: stopped (SIGSTOP, a debugger), hung or dead"},
		{"silent, relayed", errors.New("no data or heartbeat for 10s"), "not responding: stopped (SIGSTOP, a debugger), hung or dead"},
		{"closed", errors.New("connection closed"), "the process probably died"},
	} {
		msg := (&PeerLostError{Rank: 1, Op: KindAllReduce, ReportedBy: -1, Err: tc.err}).Error()
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, msg, tc.want)
		}
		if tc.want != "the process probably died" && strings.Contains(msg, "probably died") {
			t.Errorf("%s: %q says the process died", tc.name, msg)
		}
	}
}
