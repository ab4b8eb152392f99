package comm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// PeerLostError is returned by every pending and later call once a peer's
// connection failed (closed, reset, or silent for too long). Rank is the lost
// peer; ReportedBy is the rank that saw the failure and passed the news on,
// or -1 when this rank saw it itself.
type PeerLostError struct {
	Rank       int
	Op         Kind
	ReportedBy int
	Err        error
}

func (e *PeerLostError) Error() string {
	by := ""
	if e.ReportedBy >= 0 {
		by = fmt.Sprintf(" (reported by rank %d)", e.ReportedBy)
	}
	// A closed or reset connection means the process is gone; silence
	// also fits a process that is alive but stopped (SIGSTOP, a
	// debugger, a suspended job), hung, or cut off.
	why := "the process probably died; see its log"
	if silentPeer(e.Err) {
		why = "the process is not responding: stopped (SIGSTOP, a debugger), hung or dead, or its host is unreachable; see its log"
	}
	return fmt.Sprintf("comm: lost rank %d during %s%s: %v (%s)", e.Rank, e.Op, by, e.Err, why)
}

// PeerSilentError is a peer connection that carried neither data nor a
// heartbeat for Silence: the peer may be dead, stopped or cut off.
type PeerSilentError struct{ Silence time.Duration }

// peerSilentText begins every PeerSilentError's text, which is how a rank
// that hears of the loss from another (as text) still tells it apart.
const peerSilentText = "no data or heartbeat for "

func (e *PeerSilentError) Error() string { return peerSilentText + e.Silence.String() }

func silentPeer(err error) bool {
	var s *PeerSilentError
	return errors.As(err, &s) || (err != nil && strings.HasPrefix(err.Error(), peerSilentText))
}

func (e *PeerLostError) Unwrap() error { return e.Err }

// AbortedError is returned by every pending and later call once some rank
// called Abort, timed out, or saw the ranks disagree about a collective.
// Rank is the rank that aborted; Reason is what it said.
type AbortedError struct {
	Rank   int
	Op     Kind
	Reason error
}

func (e *AbortedError) Error() string {
	return fmt.Sprintf("comm: %s aborted by rank %d: %v", e.Op, e.Rank, e.Reason)
}

func (e *AbortedError) Unwrap() error { return e.Reason }

// TimeoutError is returned by a call that did not finish before its
// deadline. Peers are the ranks it was still waiting for. It matches
// context.DeadlineExceeded under errors.Is. Timeout is the limit the call
// had; Elapsed is how long it ran.
type TimeoutError struct {
	Op      Kind
	Peers   []int
	Elapsed time.Duration
	Timeout time.Duration
}

func (e *TimeoutError) Error() string {
	who := "peers"
	switch len(e.Peers) {
	case 0:
	case 1:
		who = fmt.Sprintf("rank %d", e.Peers[0])
	default:
		who = fmt.Sprintf("ranks %v", e.Peers)
	}
	return fmt.Sprintf("comm: %s timed out after %s (timeout %s) waiting for %s; a rank is stuck, slow or issued a different collective",
		e.Op, e.Elapsed.Round(time.Millisecond), e.Timeout, who)
}

func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }
