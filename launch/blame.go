package launch

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// When one rank of a job dies, the others fail a moment later with errors
// of their own ("lost rank 1", "timed out waiting for rank 1"), and the
// supervisor may see those exits first. Blame looks at every exit of the
// job and its last lines of output to name the process that failed first.

// Exit is how one process of a job ended, as Supervise collected it.
type Exit struct {
	Label  string // "rank 1", "node 1 (worker-1)"
	Pid    int
	Ranks  []int // the global ranks the process is or runs; nil when unknown
	Status ExitStatus
	Tail   []string // its last lines of output, oldest first
	// Stopped says the supervisor had asked the process to stop (SIGTERM,
	// a closed lifeline) before its exit was seen.
	Stopped bool
	// Killed says the supervisor had sent it SIGKILL before its exit was seen.
	Killed bool
	// Frozen says it was stopped (process state T) when that SIGKILL went.
	Frozen bool
}

// own reports whether the process failed by itself rather than as the
// expected result of a stop the supervisor began: a rank that saves and
// exits 143 or 130 after SIGTERM, or dies by SIGTERM, or by the
// supervisor's SIGKILL after the grace period, did what it was told.
func (e Exit) own() bool {
	if !e.Status.Failed() {
		return false
	}
	if e.Killed && e.Status.Signal == syscall.SIGKILL {
		return false
	}
	return !(e.Stopped && StopStatus(e.Status))
}

// StopStatus reports whether s is how a process ends when it honours a
// request to stop: exit status 130 or 143 (it saved and passed the signal
// on, as gotrain train does) or death by SIGINT or SIGTERM.
func StopStatus(s ExitStatus) bool {
	switch {
	case s.Signal == syscall.SIGTERM || s.Signal == syscall.SIGINT:
		return true
	case s.Signal == 0 && s.Err == nil:
		return s.Code == 128+int(syscall.SIGTERM) || s.Code == 128+int(syscall.SIGINT)
	}
	return false
}

// Verdict is Blame's answer.
type Verdict struct {
	Index int // the culprit in the exits; -1 when no process failed
	// Evidence says why, when the culprit was named by others:
	// "rank 0 reported: comm: lost rank 1 during all-reduce: ...".
	Evidence string
	// Code is the status the launcher exits with: the culprit's own, or,
	// when the supervisor had to kill the culprit (it hung), the status of
	// the first process that failed by itself.
	Code int
}

// Blame picks the original failure among the exits of a job, given in the
// order they were seen:
//
//  1. a process killed by a signal before the supervisor began to stop the
//     job; then a node launcher whose last lines report one of its own
//     ranks killed by a signal that launcher did not send;
//  2. otherwise the rank the failed processes name most often in their last
//     lines ("lost rank N", "waiting for rank N", "ranks [N M] ... did not
//     arrive"), if a process of this job runs it and it failed;
//  3. otherwise the first process that failed by itself; otherwise the
//     first that failed at all.
//
// A signal death seen only after the stop began (a crash while saving)
// does not outrank the failure that made the supervisor stop the job.
//
// It is a pure function of its input.
func Blame(exits []Exit) Verdict {
	firstOwn, firstFailed := -1, -1
	for i, e := range exits {
		if !e.Status.Failed() {
			continue
		}
		if firstFailed < 0 {
			firstFailed = i
		}
		if e.own() && firstOwn < 0 {
			firstOwn = i
		}
	}
	if firstFailed < 0 {
		return Verdict{Index: -1}
	}
	for i, e := range exits {
		if e.own() && !e.Stopped && e.Status.Signal != 0 {
			return Verdict{Index: i, Code: e.Status.ExitCode()}
		}
	}
	for i, e := range exits {
		if !e.own() {
			continue
		}
		if line, ok := reportsOwnSignal(e); ok {
			return Verdict{Index: i, Evidence: line, Code: e.Status.ExitCode()}
		}
	}
	if rank, evidence, ok := mostNamed(exits); ok {
		for i, e := range exits {
			if e.Status.Failed() && slices.Contains(e.Ranks, rank) {
				code := e.Status.ExitCode()
				if !e.own() && firstOwn >= 0 {
					code = exits[firstOwn].Status.ExitCode()
				}
				return Verdict{Index: i, Evidence: evidence, Code: code}
			}
		}
	}
	i := firstOwn
	if i < 0 {
		i = firstFailed
	}
	return Verdict{Index: i, Code: exits[i].Status.ExitCode()}
}

var (
	// What comm's errors say about other ranks: PeerLostError ("lost rank
	// 1"), TimeoutError ("waiting for rank 1", "waiting for ranks [1 2]"),
	// and the rendezvous and connect timeouts ("ranks [1] of 2 did not
	// arrive", "ranks [1] never connected").
	lostRankRE   = regexp.MustCompile(`\blost rank (\d+)`)
	waitRankRE   = regexp.MustCompile(`\bwaiting for rank (\d+)`)
	waitRanksRE  = regexp.MustCompile(`\bwaiting for ranks \[([\d ]+)\]`)
	missingRanks = regexp.MustCompile(`\branks \[([\d ]+)\] (?:of \d+ did not arrive|never connected)`)
	// How a node launcher reports a rank killed by a signal it did not send
	// (ProcessError's text).
	killedRankRE = regexp.MustCompile(`\brank (\d+) \(pid \d+\) was killed by signal ([A-Z0-9]+|signal \d+)`)
)

// NamedRanks returns the ranks that one line of a rank's error output
// blames: the lost peer of a broken connection, the ranks a timed-out
// collective or rendezvous was waiting for. A rank that aborted and passed
// the news on ("aborted by rank 0: ...") is not blamed; the reason it gives
// usually names the culprit.
func NamedRanks(line string) []int {
	var out []int
	add := func(s string) {
		if n, err := strconv.Atoi(s); err == nil && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	for _, re := range []*regexp.Regexp{lostRankRE, waitRankRE} {
		for _, m := range re.FindAllStringSubmatch(line, -1) {
			add(m[1])
		}
	}
	for _, re := range []*regexp.Regexp{waitRanksRE, missingRanks} {
		for _, m := range re.FindAllStringSubmatch(line, -1) {
			for f := range strings.FieldsSeq(m[1]) {
				add(f)
			}
		}
	}
	return out
}

// reportsOwnSignal finds a line in which a node launcher reports one of its
// own ranks killed by a signal that it did not send itself.
func reportsOwnSignal(e Exit) (string, bool) {
	for _, line := range slices.Backward(e.Tail) {
		if strings.Contains(line, sentByLauncher) {
			continue
		}
		m := killedRankRE.FindStringSubmatch(line)
		if m == nil || m[2] == SignalName(syscall.SIGTERM) || m[2] == SignalName(syscall.SIGINT) {
			continue // SIGTERM and SIGINT are how launchers stop ranks
		}
		if n, err := strconv.Atoi(m[1]); err == nil && slices.Contains(e.Ranks, n) {
			return strings.TrimPrefix(strings.TrimSpace(line), "gotrain: "), true
		}
	}
	return "", false
}

// mostNamed counts, over the failed exits, the ranks their last lines blame
// (each exit votes once per rank, never for its own ranks) and returns the
// rank with most votes, the earliest named on a tie, with the line that
// named it first.
func mostNamed(exits []Exit) (int, string, bool) {
	votes := map[int]int{}
	var order []int
	evidence := map[int]string{}
	for _, e := range exits {
		if !e.Status.Failed() {
			continue
		}
		seen := map[int]bool{}
		for _, line := range e.Tail {
			for _, r := range NamedRanks(line) {
				if seen[r] || slices.Contains(e.Ranks, r) {
					continue
				}
				seen[r] = true
				if votes[r] == 0 {
					order = append(order, r)
					evidence[r] = fmt.Sprintf("%s reported: %s", e.Label, strings.TrimPrefix(strings.TrimSpace(line), "gotrain: "))
				}
				votes[r]++
			}
		}
	}
	best := -1
	for _, r := range order {
		if best < 0 || votes[r] > votes[best] {
			best = r
		}
	}
	if best < 0 {
		return 0, "", false
	}
	return best, evidence[best], true
}
