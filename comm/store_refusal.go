package comm

import (
	"fmt"
	"time"
)

// A rank the store refuses (another secret, a secret derived from other
// settings, another job id) learns why at once and exits, so rank 0 would
// otherwise wait out the whole rendezvous timeout (--comm-timeout, 30
// minutes by default) without a word. The store says at once which rank
// it refused, from where and why, and fails the join for every rank unless
// that rank joins within refusalGrace: a stray connection claiming a rank
// (an unauthenticated name) costs a slow rank nothing if it arrives in
// time, and a real misconfiguration costs seconds, not half an hour.

// defaultRefusalGrace is how long the join waits, after refusing a rank,
// for that rank to join after all. Rendezvous makes it at most half the
// rendezvous timeout, so the refusal, not a bare timeout, ends the join.
const defaultRefusalGrace = 30 * time.Second

// maxRefusalLogs bounds the refusals a store reports one by one, so a
// flood of bad connections cannot flood the log.
const maxRefusalLogs = 16

// why says what a refusal means and what to check.
func (r *refusal) why(jobID string) string {
	if r.wrongJob {
		return fmt.Sprintf("it belongs to job %s, not this job %s: it was started with another GOTRAIN_JOB_ID, or it is a rank of another job using this MASTER_PORT",
			quoteJob(r.otherJob), quoteJob(jobID))
	}
	return "its proof of the job secret was wrong: it was given another GOTRAIN_JOB_SECRET or GOTRAIN_JOB_SECRET_FILE than rank 0, or, when the secret is derived from SLURM_JOB_ID or MASTER_PORT and the run's settings, it runs with other settings (its own log says where its secret came from)"
}

// refuseLocked records a refused connection from addr and arms the join's
// failure for the rank it claimed. It returns the log call to make once mu
// is released (nil when nothing is to be said).
func (s *storeServer) refuseLocked(rf *refusal, addr string) func() {
	s.refused++
	s.lastFrom = addr
	j := &s.join
	waiting := !s.closed && !j.complete && j.failed == nil
	inWorld := rf.rank >= 0 && rf.rank < s.size
	var msg string
	switch {
	case !inWorld:
		msg = fmt.Sprintf("rendezvous: refused a connection from %s claiming rank %d, outside this job's [0, %d): %s",
			addr, rf.rank, s.size, rf.why(s.cfg.jobID))
	case waiting && !j.arrived[rf.rank]:
		if s.refusals[rf.rank] == nil {
			rank, at := rf.rank, time.Now()
			why := rf.why(s.cfg.jobID)
			s.refusals[rank] = time.AfterFunc(s.cfg.refusalGrace, func() { s.failJoinForRefusal(rank, addr, why, at) })
		}
		msg = fmt.Sprintf("rendezvous: refused rank %d connecting from %s: %s; the job stops unless rank %d joins within %s",
			rf.rank, addr, rf.why(s.cfg.jobID), rf.rank, roundDuration(s.cfg.refusalGrace))
	default:
		msg = fmt.Sprintf("rendezvous: refused a connection from %s claiming rank %d: %s",
			addr, rf.rank, rf.why(s.cfg.jobID))
	}
	if s.cfg.warnf == nil || s.refusalLog > maxRefusalLogs {
		return nil
	}
	s.refusalLog++
	if s.refusalLog > maxRefusalLogs {
		msg = fmt.Sprintf("rendezvous: %d connections refused so far; not reporting more of them one by one", s.refused)
	}
	warnf := s.cfg.warnf
	return func() { warnf("%s", msg) }
}

// failJoinForRefusal fails the join for every rank when rank, refused at
// `at` from addr, has not joined since.
func (s *storeServer) failJoinForRefusal(rank int, addr, why string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := &s.join
	if s.closed || j.complete || j.failed != nil || j.arrived[rank] {
		return
	}
	j.failed = fmt.Errorf("rendezvous: rank %d cannot join: the store refused it (connecting from %s) %s ago, and it has not joined since: %s",
		rank, addr, roundDuration(time.Since(at)), why)
	close(j.done)
}
