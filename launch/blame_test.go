package launch

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKilledRankIsBlamedNotTheSurvivor: rank 1 is killed with SIGKILL and
// rank 0 fails at once with "lost rank 1"; rank 1's exit is seen later (a
// child it started holds its output pipe open, as the supervisor's drain
// waits for). The launcher must still name rank 1 and return 137, not rank
// 0's status 1, every time.
func TestKilledRankIsBlamedNotTheSurvivor(t *testing.T) {
	for trial := range 5 {
		job, dir, _, stderr := helperJob(t, 2, "lost", grandchildEnv+"=1")
		errc := runAsync(context.Background(), job, SuperviseOptions{GracePeriod: 5 * time.Second})
		pids := waitPids(t, dir, rankNames(2)...)
		victim := pids["rank_1"][0]
		if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := await(t, errc, 25*time.Second)
		var pe *ProcessError
		if !errors.As(err, &pe) {
			t.Fatalf("trial %d: error %v (%T), want *ProcessError", trial, err, err)
		}
		if pe.Label != "rank 1" || pe.Pid != victim || pe.ExitCode() != 137 {
			t.Fatalf("trial %d: blamed %s (pid %d) with exit code %d; want rank 1 (pid %d), 137\nerror: %v\nlauncher said:\n%s",
				trial, pe.Label, pe.Pid, pe.ExitCode(), victim, err, stderr)
		}
		if !strings.Contains(err.Error(), "rank 1 (pid "+fmt.Sprint(victim)+") was killed by signal KILL") ||
			!strings.Contains(err.Error(), "rank 0 reported: step 3: backward: comm: lost rank 1") {
			t.Errorf("trial %d: error %q does not say what happened and who saw it", trial, err)
		}
		// The survivor's failure is in the log, but it is not the verdict.
		if !strings.Contains(stderr.String(), "gotrain launch: rank 0 (pid ") {
			t.Errorf("trial %d: rank 0's exit is not logged:\n%s", trial, stderr)
		}
		assertAllGone(t, pids)
	}
}

// TestHungRankIsBlamed: rank 1 stops answering (SIGSTOP: it ignores SIGTERM
// until killed) and rank 0 times out waiting for it. The launcher names
// rank 1, the one the others waited for, says it had to kill it, and exits
// with the status of the failure that started the stop (rank 0's 1).
func TestHungRankIsBlamed(t *testing.T) {
	job, dir, _, stderr := helperJob(t, 2, "hang")
	errc := runAsync(context.Background(), job, SuperviseOptions{GracePeriod: 300 * time.Millisecond})
	pids := waitPids(t, dir, rankNames(2)...)
	err := await(t, errc, 25*time.Second)
	var pe *ProcessError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T), want *ProcessError", err, err)
	}
	if pe.Label != "rank 1" || pe.Pid != pids["rank_1"][0] {
		t.Fatalf("blamed %s; want rank 1, the rank the others waited for\nerror: %v\nlauncher said:\n%s", pe.Label, err, stderr)
	}
	if pe.ExitCode() != 1 || !pe.KilledByLauncher {
		t.Errorf("exit code %d, killed by the launcher %v; want 1 (rank 0's timeout) and true", pe.ExitCode(), pe.KilledByLauncher)
	}
	// Rank 1 stopped itself with SIGSTOP: the verdict says it was stopped,
	// not only that it did not stop in time.
	for _, want := range []string{"sent by gotrain launch: it did not stop within the grace period", "it was stopped (process state T: SIGSTOP, Ctrl-Z or a debugger)",
		"rank 0 reported: step 3: comm: all-reduce timed out", "waiting for rank 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	assertAllGone(t, pids)
}

// TestInterruptExpectsStopStatuses: ranks that save and exit 143 after
// SIGTERM did what the stop asked; the launcher returns its own interrupt
// status and does not report them as failures.
func TestInterruptExpectsStopStatuses(t *testing.T) {
	job, dir, _, stderr := helperJob(t, 2, "sleep", onTermEnv+"=save143")
	ctx, cancel := context.WithCancelCause(context.Background())
	errc := runAsync(ctx, job, SuperviseOptions{GracePeriod: 10 * time.Second})
	pids := waitPids(t, dir, rankNames(2)...)
	cancel(SignalCause{Signal: syscall.SIGTERM})
	err := await(t, errc, 25*time.Second)
	var ie *InterruptedError
	if !errors.As(err, &ie) || ie.ExitCode() != 143 {
		t.Fatalf("error %v, want *InterruptedError with code 143", err)
	}
	if strings.Contains(stderr.String(), "during the stop") {
		t.Errorf("ranks that exited 143 after SIGTERM are reported as failures:\n%s", stderr)
	}
	assertAllGone(t, pids)
}

// TestStopLogsEveryNonZeroExit: when rank 2 fails, the other ranks' exits
// during the stop (here 143 after saving) are logged, and the verdict stays
// rank 2 with its status.
func TestStopLogsEveryNonZeroExit(t *testing.T) {
	job, dir, _, stderr := helperJob(t, 3, "sleep", failRankEnv+"=2", failCodeEnv+"=3", onTermEnv+"=save143")
	errc := runAsync(context.Background(), job, SuperviseOptions{GracePeriod: 5 * time.Second})
	pids := waitPids(t, dir, rankNames(3)...)
	err := await(t, errc, 25*time.Second)
	var pe *ProcessError
	if !errors.As(err, &pe) || pe.Label != "rank 2" || pe.ExitCode() != 3 {
		t.Fatalf("error %v, want rank 2 with exit code 3", err)
	}
	for _, r := range []int{0, 1} {
		want := fmt.Sprintf("gotrain launch: during the stop, rank %d (pid %d) exited with status 143", r, pids[fmt.Sprintf("rank_%d", r)][0])
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, stderr)
		}
	}
	assertAllGone(t, pids)
}

func TestBlame(t *testing.T) {
	killed := ExitStatus{Signal: syscall.SIGKILL}
	lost1 := []string{"gotrain: step 9: comm: lost rank 1 during reduce-scatter: connection closed"}
	tests := []struct {
		name     string
		exits    []Exit
		index    int
		code     int
		evidence string
	}{
		{"nothing failed", []Exit{{Label: "rank 0"}, {Label: "rank 1"}}, -1, 0, ""},
		{"the one failure", []Exit{{Label: "rank 0"}, {Label: "rank 1", Status: ExitStatus{Code: 3}}}, 1, 3, ""},
		{"signal death seen after the survivor's exit",
			[]Exit{{Label: "rank 0", Ranks: []int{0}, Status: ExitStatus{Code: 1}, Tail: lost1}, {Label: "rank 1", Ranks: []int{1}, Status: killed}},
			1, 137, ""},
		{"signal death seen only during the stop, named by the survivor",
			[]Exit{{Label: "rank 0", Ranks: []int{0}, Status: ExitStatus{Code: 1}, Tail: lost1}, {Label: "rank 1", Ranks: []int{1}, Status: killed, Stopped: true}},
			1, 137, "rank 0 reported: step 9: comm: lost rank 1 during reduce-scatter: connection closed"},
		{"a crash while saving does not outrank the first failure",
			[]Exit{{Label: "rank 0", Ranks: []int{0}, Status: ExitStatus{Code: 2}, Tail: []string{"gotrain: bad shard"}},
				{Label: "rank 1", Ranks: []int{1}, Status: ExitStatus{Signal: syscall.SIGSEGV}, Stopped: true}},
			0, 2, ""},
		{"hung rank killed by the supervisor",
			[]Exit{{Label: "rank 0", Ranks: []int{0}, Status: ExitStatus{Code: 1}, Tail: []string{"comm: all-reduce timed out after 30s (timeout 30s) waiting for rank 2; a rank is stuck"}},
				{Label: "rank 1", Ranks: []int{1}, Status: ExitStatus{Code: 143}, Stopped: true},
				{Label: "rank 2", Ranks: []int{2}, Status: killed, Stopped: true, Killed: true}},
			2, 1, "rank 0 reported: comm: all-reduce timed out after 30s (timeout 30s) waiting for rank 2; a rank is stuck"},
		{"most named wins",
			[]Exit{{Label: "rank 0", Ranks: []int{0}, Status: ExitStatus{Code: 1}, Tail: []string{"waiting for ranks [2 3]"}},
				{Label: "rank 1", Ranks: []int{1}, Status: ExitStatus{Code: 1}, Tail: []string{"comm: lost rank 3 during all-gather"}},
				{Label: "rank 2", Ranks: []int{2}, Status: ExitStatus{Code: 143}, Stopped: true},
				{Label: "rank 3", Ranks: []int{3}, Status: ExitStatus{Code: 1}, Stopped: true}},
			3, 1, "rank 0 reported: waiting for ranks [2 3]"},
		{"a node launcher reporting its rank's signal death",
			[]Exit{{Label: "node 0 (a)", Ranks: []int{0, 1}, Status: ExitStatus{Code: 1}, Tail: []string{"[rank 1] gotrain: comm: lost rank 2 during all-reduce"}},
				{Label: "node 1 (b)", Ranks: []int{2, 3}, Status: ExitStatus{Code: 137}, Stopped: true,
					Tail: []string{"gotrain launch: rank 2 (pid 77) was killed by signal KILL; stopping the other 1", "gotrain: rank 2 (pid 77) was killed by signal KILL"}}},
			1, 137, "rank 2 (pid 77) was killed by signal KILL"},
		{"a node launcher's own SIGKILL is not a foreign signal",
			[]Exit{{Label: "node 0 (a)", Ranks: []int{0}, Status: ExitStatus{Code: 2}, Tail: []string{"gotrain: bad config"}},
				{Label: "node 1 (b)", Ranks: []int{1}, Status: ExitStatus{Code: 137}, Stopped: true,
					Tail: []string{"gotrain: rank 1 (pid 7) was killed by signal KILL (sent by gotrain launch: it did not stop within the grace period)"}}},
			0, 2, ""},
		{"a node launcher's stop log is not a foreign signal",
			[]Exit{{Label: "node 0 (a)", Ranks: []int{0}, Status: ExitStatus{Code: 2}, Tail: []string{"gotrain: bad config"}},
				{Label: "node 1 (b)", Ranks: []int{1, 2}, Status: ExitStatus{Code: 1}, Stopped: true,
					Tail: []string{"gotrain launch: during the stop, rank 1 (pid 7) was killed by signal KILL (sent by gotrain launch after the grace period)",
						"gotrain launch: during the stop, rank 2 (pid 8) was killed by signal TERM"}}},
			0, 2, ""},
		{"stop statuses only", []Exit{{Label: "rank 0", Status: ExitStatus{Code: 143}, Stopped: true}, {Label: "rank 1", Status: ExitStatus{Signal: syscall.SIGTERM}, Stopped: true}}, 0, 143, ""},
		{"a rank never blames itself",
			[]Exit{{Label: "rank 0", Ranks: []int{0}, Status: ExitStatus{Code: 1}, Tail: []string{"lost rank 0"}}, {Label: "rank 1", Ranks: []int{1}, Status: ExitStatus{Code: 2}}},
			0, 1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Blame(tc.exits)
			if v.Index != tc.index || v.Code != tc.code || v.Evidence != tc.evidence {
				t.Errorf("Blame = %+v, want index %d code %d evidence %q", v, tc.index, tc.code, tc.evidence)
			}
		})
	}
}

func TestNamedRanks(t *testing.T) {
	for line, want := range map[string][]int{
		"comm: lost rank 3 during all-reduce (reported by rank 0): EOF":                                           {3},
		"comm: all-gather timed out after 1s (timeout 1s) waiting for rank 12; a rank is stuck":                   {12},
		"comm: reduce-scatter timed out after 1s (timeout 1s) waiting for ranks [1 4]; a rank is stuck":           {1, 4},
		"rendezvous: ranks [2 3] of 4 did not arrive within 30m0s; check that every rank was started":             {2, 3},
		"comm: ranks [5] never connected to rank 0 within 1m0s: dial tcp: connection refused":                     {5},
		"comm: all-reduce aborted by rank 2: comm: all-reduce timed out after 1s (timeout 1s) waiting for rank 1": {1},
		"comm: all-reduce aborted by rank 2: stopped":                                                             nil,
		"loss 4.1 | step 3": nil,
	} {
		if got := NamedRanks(line); !reflect.DeepEqual(got, want) {
			t.Errorf("NamedRanks(%q) = %v, want %v", line, got, want)
		}
	}
}

func TestInterruptCode(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("x"))
	for _, tc := range []struct {
		cause error
		want  int
	}{
		{SignalCause{Signal: syscall.SIGTERM}, 143},
		{SignalCause{Signal: syscall.SIGINT}, 130},
		{SignalCause{Signal: syscall.SIGHUP}, 129},
		{fmt.Errorf("wrapped: %w", SignalCause{Signal: syscall.SIGTERM}), 143},
		// os/signal.NotifyContext's cause, which also matches context.Canceled.
		{notifyCause("terminated signal received"), 143},
		{notifyCause("interrupt signal received"), 130},
		{errors.New("the connection to the launcher closed"), 130},
		{context.Cause(ctx), 130},
		{nil, 130},
	} {
		if got := InterruptCode(tc.cause); got != tc.want {
			t.Errorf("InterruptCode(%v) = %d, want %d", tc.cause, got, tc.want)
		}
	}
}

// notifyCause behaves as os/signal's unexported signalError.
type notifyCause string

func (c notifyCause) Error() string        { return string(c) }
func (c notifyCause) Is(target error) bool { return target == context.Canceled }

func TestTailWriter(t *testing.T) {
	tw := newTailWriter(3)
	var dst syncBuffer
	_, w := tw.wrap(nil, &dst)
	for i := range 5 {
		fmt.Fprintf(w, "line %d\n", i)
	}
	w.Write([]byte("partial"))
	if got, want := tw.Lines(), []string{"line 3", "line 4", "partial"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Lines() = %q, want %q", got, want)
	}
	if !strings.HasPrefix(dst.String(), "line 0\n") || !strings.HasSuffix(dst.String(), "partial") {
		t.Errorf("the output was not passed on: %q", dst.String())
	}
	long := strings.Repeat("x", 3*maxTailLine)
	w.Write([]byte(long + "\n"))
	if l := tw.Lines(); len(l[len(l)-1]) != maxTailLine {
		t.Errorf("a long line is kept with %d bytes, want %d", len(l[len(l)-1]), maxTailLine)
	}
	// A destination that fails is dropped, not reported to the process.
	_, w = newTailWriter(2).wrap(nil, failingWriter{})
	if n, err := w.Write([]byte("x\n")); n != 2 || err != nil {
		t.Errorf("Write to a broken destination = %d, %v; want 2, nil", n, err)
	}
	// The same writer for stdout and stderr stays one writer.
	lw := NewSharedOutput(&dst).Prefixed("> ")
	o, e := newTailWriter(2).wrap(lw, lw)
	if o != e {
		t.Error("stdout and stderr to one LineWriter became two writers")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, syscall.EPIPE }
