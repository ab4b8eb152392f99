package launch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the rank program: with helperEnv set, TestMain
// runs helperMain instead of the tests.
const (
	helperEnv       = "GOTRAIN_LAUNCH_TEST_HELPER" // mode: args, sleep, print, stdin, grandchild, launcher, lost, hang
	helperDirEnv    = "GOTRAIN_LAUNCH_TEST_DIR"    // where helpers write pid files and reports
	grandchildEnv   = "GOTRAIN_LAUNCH_TEST_GRANDCHILD"
	onTermEnv       = "GOTRAIN_LAUNCH_TEST_ON_TERM" // "", save, save143 (save, then exit 143), ignore
	failRankEnv     = "GOTRAIN_LAUNCH_TEST_FAIL_RANK"
	failCodeEnv     = "GOTRAIN_LAUNCH_TEST_FAIL_CODE"
	helperLifespan  = 60 * time.Second // no helper outlives a broken test by more
	helperSleepCode = 3                // a sleeping helper that was never stopped
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode))
	}
	os.Exit(m.Run())
}

func helperMain(mode string) int {
	dir := os.Getenv(helperDirEnv)
	rank := os.Getenv("RANK")
	switch mode {
	case "args":
		cwd, _ := os.Getwd()
		env := map[string]string{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		b, _ := json.Marshal(argsReport{Args: os.Args[1:], Dir: cwd, Env: env})
		if err := os.WriteFile(dir, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "print":
		fmt.Printf("out rank %s\n", rank)
		fmt.Fprintf(os.Stderr, "err rank %s\n", rank)
		fmt.Printf("tail %s", rank)
		return 0
	case "stdin":
		// Reports whether stdin stays open (a lifeline) or ends at once.
		got := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			close(got)
		}()
		select {
		case <-got:
			fmt.Println("stdin ended")
		case <-time.After(300 * time.Millisecond):
			fmt.Println("stdin open")
		}
		fmt.Fprintf(os.Stderr, "node %s done", os.Getenv("NODE"))
		return 0
	case "grandchild":
		time.Sleep(helperLifespan)
		return helperSleepCode
	case "launcher":
		return helperLauncher(dir)
	case "sleep":
		return helperSleep(dir, rank)
	case "lost", "hang":
		if rank == "0" {
			return helperSurvivor(dir, mode)
		}
		if mode == "hang" {
			// Stops answering, as a rank in a stuck collective does; SIGTERM
			// stays pending and only SIGKILL ends it.
			if err := writeAtomic(filepath.Join(dir, "rank_"+rank+".pid"), strconv.Itoa(os.Getpid())); err != nil {
				return 1
			}
			_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			return helperSleepCode
		}
		return helperSleep(dir, rank)
	}
	fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
	return 2
}

// helperSleep is a rank that waits to be stopped: it records its pid (and
// its grandchild's), then sleeps; SIGTERM does what onTermEnv says.
func helperSleep(dir, rank string) int {
	term := make(chan os.Signal, 1)
	switch os.Getenv(onTermEnv) {
	case "save", "save143":
		signal.Notify(term, syscall.SIGTERM)
	case "ignore":
		signal.Ignore(syscall.SIGTERM)
	}
	line := strconv.Itoa(os.Getpid())
	if os.Getenv(grandchildEnv) != "" {
		exe, _ := os.Executable()
		gc := exec.Command(exe)
		gc.Env = append(os.Environ(), helperEnv+"=grandchild")
		// The grandchild holds the rank's output pipe, as a stray child would.
		gc.Stdout, gc.Stderr = os.Stdout, os.Stderr
		if err := gc.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		line += " " + strconv.Itoa(gc.Process.Pid)
	}
	if err := writeAtomic(filepath.Join(dir, "rank_"+rank+".pid"), line); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if rank != "" && rank == os.Getenv(failRankEnv) {
		time.Sleep(100 * time.Millisecond)
		code, _ := strconv.Atoi(os.Getenv(failCodeEnv))
		return code
	}
	select {
	case <-term:
		if err := writeAtomic(filepath.Join(dir, "rank_"+rank+".saved"), "saved"); err != nil {
			return 1
		}
		if os.Getenv(onTermEnv) == "save143" {
			return 128 + int(syscall.SIGTERM) // saved, and passes the signal on as gotrain train does
		}
		return 0
	case <-time.After(helperLifespan):
		return helperSleepCode
	}
}

// helperSurvivor is rank 0 of a two-rank job whose rank 1 dies ("lost") or
// stops answering ("hang"): it waits for that and fails the way gotrain
// train's collectives do, naming rank 1.
func helperSurvivor(dir, mode string) int {
	if err := writeAtomic(filepath.Join(dir, "rank_0.pid"), strconv.Itoa(os.Getpid())); err != nil {
		return 1
	}
	deadline := time.Now().Add(helperLifespan)
	for time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		b, err := os.ReadFile(filepath.Join(dir, "rank_1.pid"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		pid, _ := strconv.Atoi(f[0])
		switch {
		case mode == "lost" && processGone(pid):
			fmt.Fprintln(os.Stderr, "step 3: backward: comm: lost rank 1 during reduce-scatter: connection closed (the process probably died; see its log)")
			fmt.Fprintln(os.Stderr, "gotrain: step 3: backward: comm: lost rank 1 during reduce-scatter: connection closed (the process probably died; see its log)")
			return 1
		case mode == "hang" && processState(pid) == 'T':
			fmt.Fprintln(os.Stderr, "gotrain: step 3: comm: all-reduce timed out after 1s (timeout 1s) waiting for rank 1; a rank is stuck, slow or issued a different collective")
			return 1
		}
	}
	return helperSleepCode
}

// helperLauncher is a launcher process for the parent-death test: it runs
// two sleeping ranks and records its own pid.
func helperLauncher(dir string) int {
	exe, _ := os.Executable()
	env := append(os.Environ(), helperEnv+"=sleep")
	job := NodeJob{Nodes: []Node{{"localhost", []int{0, 1}}}, Binary: exe, Env: env,
		MasterAddr: "127.0.0.1", MasterPort: DefaultMasterPort, Stdout: os.Stdout, Stderr: os.Stderr}
	if err := writeAtomic(filepath.Join(dir, "launcher.pid"), strconv.Itoa(os.Getpid())); err != nil {
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), helperLifespan)
	defer cancel()
	if err := RunNode(ctx, ExecRunner{}, job, SuperviseOptions{}); err != nil {
		return 1
	}
	return 0
}

func writeAtomic(path, text string) error {
	if err := os.WriteFile(path+".tmp", []byte(text), 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

type argsReport struct {
	Args []string
	Dir  string
	Env  map[string]string
}

func readArgsReport(t *testing.T, path string) argsReport {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r argsReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// waitPids waits for the pid files of ranks (or other names) and returns
// every pid in them.
func waitPids(t *testing.T, dir string, names ...string) map[string][]int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	out := map[string][]int{}
	for _, n := range names {
		for {
			b, err := os.ReadFile(filepath.Join(dir, n+".pid"))
			if err == nil {
				for f := range strings.FieldsSeq(string(b)) {
					pid, err := strconv.Atoi(f)
					if err != nil {
						t.Fatalf("pid file %s: %q", n, b)
					}
					out[n] = append(out[n], pid)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never wrote its pid file", n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return out
}

// processState is the state letter of pid in /proc (R, S, T, Z...), or 0.
func processState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0
	}
	return s[i+2]
}

// processGone reports whether pid no longer runs: it does not exist, or is
// a zombie waiting for whichever process inherited it to reap it.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return os.IsNotExist(err)
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// assertAllGone fails unless every pid stops running within a short while;
// processes killed a moment ago may take a few milliseconds to disappear.
func assertAllGone(t *testing.T, pids map[string][]int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for name, list := range pids {
		for _, pid := range list {
			for !processGone(pid) {
				if time.Now().After(deadline) {
					t.Errorf("%s: process %d is still running", name, pid)
					_ = syscall.Kill(pid, syscall.SIGKILL)
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
}
