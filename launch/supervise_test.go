package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the supervisor's and the output
// copiers' goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// helperJob is a one-node job of n ranks of the test binary in mode.
func helperJob(t *testing.T, n int, mode string, extraEnv ...string) (NodeJob, string, *syncBuffer, *syncBuffer) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := append(os.Environ(), helperEnv+"="+mode, helperDirEnv+"="+dir)
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	return NodeJob{
		Nodes:  []Node{{"localhost", slotRange(n)}},
		Binary: exe, Args: []string{"rank-helper"},
		Env:        append(env, extraEnv...),
		MasterAddr: "127.0.0.1", MasterPort: DefaultMasterPort,
		Stdout: stdout, Stderr: stderr,
	}, dir, stdout, stderr
}

func rankNames(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("rank_%d", i)
	}
	return s
}

// runAsync runs the job and returns a channel with its result; the test
// fails instead of hanging if the launcher never returns.
func runAsync(ctx context.Context, job NodeJob, opts SuperviseOptions) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- RunNode(ctx, ExecRunner{}, job, opts) }()
	return errc
}

func await(t *testing.T, errc <-chan error, limit time.Duration) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(limit):
		t.Fatalf("the launcher did not return within %v", limit)
		return nil
	}
}

// TestKillNineOneRank is the acceptance test: kill -9 of one rank stops
// every rank and their children, and the launcher returns exit code 137
// naming the lost rank.
func TestKillNineOneRank(t *testing.T) {
	job, dir, _, stderr := helperJob(t, 3, "sleep", grandchildEnv+"=1")
	errc := runAsync(context.Background(), job, SuperviseOptions{GracePeriod: 5 * time.Second})
	pids := waitPids(t, dir, rankNames(3)...)
	victim := pids["rank_1"][0]
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := await(t, errc, 25*time.Second)

	var pe *ProcessError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T), want *ProcessError", err, err)
	}
	if pe.Label != "rank 1" || pe.Pid != victim || pe.ExitCode() != 137 || pe.Status.Signal != syscall.SIGKILL {
		t.Errorf("got %+v, exit code %d; want rank 1, pid %d, SIGKILL, 137", pe, pe.ExitCode(), victim)
	}
	want := fmt.Sprintf("rank 1 (pid %d) was killed by signal KILL", victim)
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if !strings.Contains(stderr.String(), "gotrain launch: "+want+"; stopping the other 2") {
		t.Errorf("launcher output does not report the lost rank:\n%s", stderr)
	}
	assertAllGone(t, pids)
}

func TestRankExitCodePassesThrough(t *testing.T) {
	job, dir, _, stderr := helperJob(t, 3, "sleep", failRankEnv+"=2", failCodeEnv+"=3")
	errc := runAsync(context.Background(), job, SuperviseOptions{GracePeriod: 5 * time.Second})
	pids := waitPids(t, dir, rankNames(3)...)
	err := await(t, errc, 25*time.Second)
	var pe *ProcessError
	if !errors.As(err, &pe) || pe.Label != "rank 2" || pe.ExitCode() != 3 {
		t.Fatalf("error %v, want rank 2 with exit code 3", err)
	}
	if want := fmt.Sprintf("rank 2 (pid %d) exited with status 3", pids["rank_2"][0]); err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if !strings.Contains(stderr.String(), "stopping the other 2 (SIGTERM, SIGKILL after 5s)") {
		t.Errorf("launcher output:\n%s", stderr)
	}
	assertAllGone(t, pids)
}

// TestInterruptForwardsSIGTERM is Ctrl-C: every rank gets SIGTERM and the
// time to save before the launcher returns 130.
func TestInterruptForwardsSIGTERM(t *testing.T) {
	job, dir, _, _ := helperJob(t, 3, "sleep", onTermEnv+"=save", grandchildEnv+"=1")
	ctx, cancel := context.WithCancel(context.Background())
	errc := runAsync(ctx, job, SuperviseOptions{GracePeriod: 10 * time.Second})
	pids := waitPids(t, dir, rankNames(3)...)
	cancel()
	err := await(t, errc, 25*time.Second)
	var ie *InterruptedError
	if !errors.As(err, &ie) || ie.ExitCode() != 130 {
		t.Fatalf("error %v, want *InterruptedError with code 130", err)
	}
	for _, r := range rankNames(3) {
		if _, err := os.Stat(filepath.Join(dir, r+".saved")); err != nil {
			t.Errorf("%s did not get to save: %v", r, err)
		}
	}
	assertAllGone(t, pids)
}

// TestGraceThenSIGKILL: ranks that ignore SIGTERM are killed after the grace
// period, and a second interrupt (Force) kills at once.
func TestGraceThenSIGKILL(t *testing.T) {
	t.Run("grace", func(t *testing.T) {
		job, dir, _, stderr := helperJob(t, 2, "sleep", onTermEnv+"=ignore")
		ctx, cancel := context.WithCancel(context.Background())
		errc := runAsync(ctx, job, SuperviseOptions{GracePeriod: 200 * time.Millisecond, InterruptCode: 143})
		pids := waitPids(t, dir, rankNames(2)...)
		cancel()
		err := await(t, errc, 25*time.Second)
		var ie *InterruptedError
		if !errors.As(err, &ie) || ie.ExitCode() != 143 {
			t.Fatalf("error %v, want *InterruptedError with code 143", err)
		}
		if !strings.Contains(stderr.String(), "rank 0, rank 1 still running after 200ms; sending SIGKILL") {
			t.Errorf("launcher output:\n%s", stderr)
		}
		assertAllGone(t, pids)
	})
	t.Run("force", func(t *testing.T) {
		job, dir, _, stderr := helperJob(t, 2, "sleep", onTermEnv+"=ignore")
		ctx, cancel := context.WithCancel(context.Background())
		force := make(chan struct{})
		// The grace period is longer than await's limit: only Force can end it in time.
		errc := runAsync(ctx, job, SuperviseOptions{GracePeriod: time.Hour, Force: force})
		pids := waitPids(t, dir, rankNames(2)...)
		cancel()
		close(force)
		if err := await(t, errc, 25*time.Second); err == nil {
			t.Fatal("no error after an interrupt")
		}
		if !strings.Contains(stderr.String(), "sending SIGKILL") {
			t.Errorf("launcher output:\n%s", stderr)
		}
		assertAllGone(t, pids)
	})
}

func TestRankOutput(t *testing.T) {
	t.Run("prefixed", func(t *testing.T) {
		job, _, stdout, stderr := helperJob(t, 3, "print")
		if err := await(t, runAsync(context.Background(), job, SuperviseOptions{}), 25*time.Second); err != nil {
			t.Fatal(err)
		}
		if got := stdout.String(); got != "out rank 0\ntail 0" {
			t.Errorf("rank 0 stdout %q", got)
		}
		lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
		perRank := map[string][]string{}
		for _, l := range lines {
			if l == "err rank 0" {
				perRank["0"] = append(perRank["0"], l)
				continue
			}
			var r string
			if _, err := fmt.Sscanf(l, "[rank %1s] ", &r); err != nil {
				t.Fatalf("stderr line %q is neither rank 0's nor prefixed", l)
			}
			perRank[r] = append(perRank[r], strings.TrimPrefix(l, "[rank "+r+"] "))
		}
		for _, r := range []string{"1", "2"} {
			want := []string{"out rank " + r, "err rank " + r, "tail " + r}
			if strings.Join(perRank[r], "|") != strings.Join(want, "|") {
				t.Errorf("rank %s lines %q, want %q", r, perRank[r], want)
			}
		}
		if len(perRank["0"]) != 1 {
			t.Errorf("rank 0 stderr lines %q", perRank["0"])
		}
	})
	t.Run("log dir", func(t *testing.T) {
		job, dir, stdout, stderr := helperJob(t, 3, "print")
		job.LogDir = filepath.Join(dir, "logs")
		if err := await(t, runAsync(context.Background(), job, SuperviseOptions{}), 25*time.Second); err != nil {
			t.Fatal(err)
		}
		for _, r := range []string{"1", "2"} {
			b, err := os.ReadFile(filepath.Join(job.LogDir, "rank_"+r+".log"))
			if err != nil {
				t.Fatal(err)
			}
			if want := "out rank " + r + "\nerr rank " + r + "\ntail " + r; string(b) != want {
				t.Errorf("rank_%s.log = %q, want %q", r, b, want)
			}
		}
		if _, err := os.Stat(filepath.Join(job.LogDir, "rank_0.log")); !os.IsNotExist(err) {
			t.Errorf("rank 0 must print to the launcher's output, not a log file (stat: %v)", err)
		}
		if stdout.String() != "out rank 0\ntail 0" || stderr.String() != "err rank 0\n" {
			t.Errorf("launcher output %q / %q", stdout, stderr)
		}
	})
}

// TestRanksDieWithLauncher kills a launcher process with SIGKILL; its ranks
// must not outlive it (parent-death signal).
func TestRanksDieWithLauncher(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), helperEnv+"=launcher", helperDirEnv+"="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pids := waitPids(t, dir, "launcher", "rank_0", "rank_1")
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	assertAllGone(t, pids)
}

// TestRunNodeEnv checks what each rank is started with, on the second node
// of a two-node job, against DeepSpeed's numbering.
func TestRunNodeEnv(t *testing.T) {
	fr := &fakeRunner{}
	job := NodeJob{
		Nodes:    []Node{{"a", []int{0, 1, 2}}, {"b", []int{1, 3}}},
		NodeRank: 1, Binary: "/bin/gotrain", Args: []string{"train", "--config", "x.json"}, Dir: "/w",
		Env:        []string{"PATH=/bin", "RANK=99", "CUDA_VISIBLE_DEVICES=7"},
		MasterAddr: "a", MasterPort: 29600,
	}
	if err := RunNode(context.Background(), fr, job, SuperviseOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(fr.started) != 2 {
		t.Fatalf("started %d processes, want 2", len(fr.started))
	}
	for i, p := range fr.started {
		rank := 3 + i
		if p.Label != fmt.Sprintf("rank %d", rank) || p.Path != "/bin/gotrain" || p.Dir != "/w" ||
			strings.Join(p.Args, " ") != "train --config x.json" {
			t.Errorf("proc %d: %+v", i, p)
		}
		want := []string{"PATH=/bin", fmt.Sprintf("RANK=%d", rank), "CUDA_VISIBLE_DEVICES=1,3", "WORLD_SIZE=5",
			fmt.Sprintf("LOCAL_RANK=%d", i), "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=a", "MASTER_PORT=29600",
			"GROUP_RANK=1", "CROSS_RANK=1", "CROSS_SIZE=2", "LOCAL_SIZE=2"}
		if strings.Join(p.Env, " ") != strings.Join(want, " ") {
			t.Errorf("rank %d env\n got %v\nwant %v", rank, p.Env, want)
		}
		// Neither rank is rank 0, so both are prefixed onto stderr, through
		// one writer that keeps the last lines for the supervisor.
		tw, ok := p.Stdout.(*teeWriter)
		if !ok || p.Stderr != p.Stdout {
			t.Fatalf("rank %d stdout %T, stderr %T: want one *teeWriter", rank, p.Stdout, p.Stderr)
		}
		if _, ok := tw.dst.(*LineWriter); !ok {
			t.Errorf("rank %d writes to %T, want a prefixing *LineWriter", rank, tw.dst)
		}
		if !reflect.DeepEqual(p.Ranks, []int{rank}) {
			t.Errorf("rank %d: Proc.Ranks %v", rank, p.Ranks)
		}
	}
	for _, bad := range []NodeJob{{Nodes: job.Nodes, NodeRank: 2, MasterAddr: "a", MasterPort: 1}, {Nodes: job.Nodes, MasterPort: 1}} {
		if err := RunNode(context.Background(), &fakeRunner{}, bad, SuperviseOptions{}); err == nil {
			t.Errorf("RunNode(%+v) accepted", bad)
		}
	}
}

// fakeRunner starts fake processes that exit with status 0 at once, or, from
// the failAt-th start on, refuses to start. Signals are recorded.
type fakeRunner struct {
	mu      sync.Mutex
	started []Proc
	failAt  int // 1-based; 0 never fails
	procs   []*fakeProcess
}

func (f *fakeRunner) Start(p Proc) (Process, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failAt > 0 && len(f.started)+1 >= f.failAt {
		return nil, errors.New("no such file")
	}
	f.started = append(f.started, p)
	fp := &fakeProcess{pid: 1000 + len(f.started), exit: make(chan ExitStatus, 1), block: f.failAt > 0}
	if !fp.block {
		fp.exit <- ExitStatus{}
	}
	f.procs = append(f.procs, fp)
	return fp, nil
}

type fakeProcess struct {
	pid   int
	exit  chan ExitStatus
	block bool // runs until signalled

	mu      sync.Mutex
	signals []syscall.Signal
}

func (p *fakeProcess) Pid() int         { return p.pid }
func (p *fakeProcess) Wait() ExitStatus { return <-p.exit }
func (p *fakeProcess) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.signals = append(p.signals, sig)
	if p.block && len(p.signals) == 1 {
		p.exit <- ExitStatus{Signal: sig}
	}
	return nil
}

// TestSuperviseStartFailure: when the third process cannot start, the two
// already running are stopped and the error names the one that failed.
func TestSuperviseStartFailure(t *testing.T) {
	fr := &fakeRunner{failAt: 3}
	var log syncBuffer
	procs := []Proc{{Label: "rank 0"}, {Label: "rank 1"}, {Label: "rank 2"}}
	err := Supervise(context.Background(), fr, procs, SuperviseOptions{Log: &log})
	if err == nil || err.Error() != "start rank 2: no such file" {
		t.Fatalf("error %v", err)
	}
	for i, p := range fr.procs {
		if len(p.signals) == 0 || p.signals[0] != syscall.SIGTERM || p.signals[len(p.signals)-1] != syscall.SIGKILL {
			t.Errorf("process %d got signals %v, want SIGTERM first and the final SIGKILL sweep", i, p.signals)
		}
	}
	if !strings.Contains(log.String(), "stopping the 2 already started") {
		t.Errorf("log %q", log.String())
	}
}

func TestLineWriter(t *testing.T) {
	var dst syncBuffer
	out := NewSharedOutput(&dst)
	const writers, lines = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			lw := out.Prefixed(fmt.Sprintf("[w%d] ", w))
			for i := range lines {
				// Each line arrives in three pieces, to split it mid-line.
				msg := fmt.Sprintf("line %d of writer %d\n", i, w)
				lw.Write([]byte(msg[:3]))
				lw.Write([]byte(msg[3:9]))
				lw.Write([]byte(msg[9:]))
			}
			lw.Write([]byte("no newline"))
			lw.Flush()
		})
	}
	wg.Wait()
	got := strings.Split(strings.TrimSuffix(dst.String(), "\n"), "\n")
	if len(got) != writers*(lines+1) {
		t.Fatalf("%d lines, want %d", len(got), writers*(lines+1))
	}
	next := make([]int, writers)
	for _, l := range got {
		var w, i, w2 int
		if n, _ := fmt.Sscanf(l, "[w%d] line %d of writer %d", &w, &i, &w2); n == 3 {
			if w != w2 || i != next[w] {
				t.Fatalf("line %q out of order or mixed", l)
			}
			next[w]++
			continue
		}
		if n, _ := fmt.Sscanf(l, "[w%d] no newline", &w); n != 1 || next[w] != lines {
			t.Fatalf("unexpected line %q", l)
		}
	}

	// An endless line without '\n' is cut at maxLine instead of growing.
	dst = syncBuffer{}
	lw := NewSharedOutput(&dst).Prefixed("> ")
	lw.Write(bytes.Repeat([]byte("x"), maxLine+10))
	lw.Flush()
	parts := strings.Split(strings.TrimSuffix(dst.String(), "\n"), "\n")
	if len(parts) != 2 || len(parts[0]) != 2+maxLine || parts[1] != "> "+strings.Repeat("x", 10) {
		t.Fatalf("long line split into %d parts of lengths %d", len(parts), len(parts[0]))
	}
}

func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		s    ExitStatus
		code int
		text string
	}{
		{ExitStatus{Code: 0}, 0, "exited with status 0"},
		{ExitStatus{Code: 2}, 2, "exited with status 2"},
		{ExitStatus{Signal: syscall.SIGKILL}, 137, "was killed by signal KILL"},
		{ExitStatus{Signal: syscall.SIGSEGV}, 139, "was killed by signal SEGV"},
		{ExitStatus{Signal: syscall.Signal(40)}, 168, "was killed by signal signal 40"},
		{ExitStatus{Err: errors.New("boom")}, 1, "could not be waited for: boom"},
	} {
		if tc.s.ExitCode() != tc.code || tc.s.String() != tc.text || tc.s.Failed() != (tc.code != 0) {
			t.Errorf("%+v: code %d %q failed=%v", tc.s, tc.s.ExitCode(), tc.s.String(), tc.s.Failed())
		}
	}
	if InterruptCode(errors.New("terminated signal received")) != 143 || InterruptCode(errors.New("interrupt signal received")) != 130 || InterruptCode(nil) != 130 {
		t.Error("InterruptCode")
	}
}

// TestRunCommands runs two stand-ins for ssh: both must find stdin open (the
// lifeline), the first writes to the launcher's output directly and the
// second's lines reach stderr whole, the last one completed with a newline.
func TestRunCommands(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmds := []Command{{Label: "node 0 (a)", Argv: []string{exe}}, {Label: "node 1 (b)", Argv: []string{exe}}}
	var stdout, stderr syncBuffer
	// NODE tells the helpers apart; both see the same environment otherwise.
	env := append(os.Environ(), helperEnv+"=stdin")
	r := &envPerCommand{extra: []string{"NODE=0", "NODE=1"}}
	if err := RunCommands(context.Background(), r, cmds, env, &stdout, &stderr, SuperviseOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := stdout.String(); got != "stdin open\n" {
		t.Errorf("stdout %q, want node 0's line only", got)
	}
	got := stderr.String()
	for _, want := range []string{"stdin open\n", "node 1 done\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("stderr %q lacks %q", got, want)
		}
	}
	if !strings.Contains(got, "node 0 done") {
		t.Errorf("stderr %q lacks node 0's direct output", got)
	}
	if err := RunCommands(context.Background(), ExecRunner{}, []Command{{Label: "empty"}}, nil, nil, nil, SuperviseOptions{}); err == nil {
		t.Error("an empty command line was accepted")
	}
}

// envPerCommand is ExecRunner with one extra variable per started command.
type envPerCommand struct {
	extra []string
	n     int
}

func (e *envPerCommand) Start(p Proc) (Process, error) {
	p.Env = append(append([]string(nil), p.Env...), e.extra[e.n])
	e.n++
	return ExecRunner{}.Start(p)
}
