package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gotrain/gotrain/launch"
)

// The launcher tests run `gotrain launch` as a real process (this test
// binary as gotrain, see TestMain) with ranks that are rankHelper, not
// training, so that each launch takes milliseconds.
const (
	rankHelperEnv  = "GOTRAIN_TEST_RANK_HELPER"    // report, sleep
	rankDirEnv     = "GOTRAIN_TEST_RANK_DIR"       // where ranks write pid files and reports
	rankTermExit   = "GOTRAIN_TEST_RANK_TERM_EXIT" // the status a sleeping rank exits with after saving
	rankHelperLife = 60 * time.Second              // no helper outlives a broken test by more
)

// rankReport is what a "report" rank writes: how it was started.
type rankReport struct {
	Args []string
	Env  map[string]string
	Pid  int
}

// rankHelper is a rank: "report" writes rank_<r>.json and exits 0; "sleep"
// writes rank_<r>.pid and waits for SIGTERM or SIGINT, then writes
// rank_<r>.saved and exits with GOTRAIN_TEST_RANK_TERM_EXIT (1 when unset,
// as gotrain train exits after a save today).
func rankHelper(mode string) int {
	signal.Ignore(syscall.SIGPIPE) // as main does
	dir, rank := os.Getenv(rankDirEnv), os.Getenv("RANK")
	switch mode {
	case "report":
		env := map[string]string{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		b, _ := json.Marshal(rankReport{Args: os.Args, Env: env, Pid: os.Getpid()})
		if err := writeFileAtomic(filepath.Join(dir, "rank_"+rank+".json"), b); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "sleep":
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		if err := writeFileAtomic(filepath.Join(dir, "rank_"+rank+".pid"), []byte(strconv.Itoa(os.Getpid()))); err != nil {
			return 1
		}
		select {
		case <-stop:
			if err := writeFileAtomic(filepath.Join(dir, "rank_"+rank+".saved"), []byte("saved")); err != nil {
				return 1
			}
			code, err := strconv.Atoi(os.Getenv(rankTermExit))
			if err != nil {
				code = 1
			}
			return code
		case <-time.After(rankHelperLife):
			return 3
		}
	}
	fmt.Fprintln(os.Stderr, "unknown rank helper mode", mode)
	return 2
}

func writeFileAtomic(path string, b []byte) error {
	if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// helperLaunch is `gotrain launch ARGS...` whose ranks are rankHelper(mode)
// writing into dir.
func helperLaunch(ctx context.Context, mode, dir string, extraEnv []string, args ...string) *exec.Cmd {
	cmd := gotrainCmd(ctx, args...)
	cmd.Env = append(cmd.Env, rankHelperEnv+"="+mode, rankDirEnv+"="+dir)
	cmd.Env = append(cmd.Env, extraEnv...)
	return cmd
}

// waitFiles waits until every named file exists in dir.
func waitFiles(t *testing.T, dir string, limit time.Duration, names ...string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for _, n := range names {
		for {
			if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not appear within %v", n, limit)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func readRankReport(t *testing.T, path string) rankReport {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r rankReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestLauncherSignalExitStatus: SIGTERM to the launcher makes it exit 143,
// SIGINT 130, after its ranks got SIGTERM and saved; ranks that exit 1
// after saving (as gotrain train does today) do not change that. Ten
// launches each, since the status used to depend on which of two signal
// handlers ran first.
func TestLauncherSignalExitStatus(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		want int
	}{{syscall.SIGTERM, 143}, {syscall.SIGINT, 130}} {
		for trial := range 10 {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			cmd := helperLaunch(ctx, "sleep", dir, nil, "launch", "--nproc", "2", "--master_port", "0", "train")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitFiles(t, dir, 20*time.Second, "rank_0.pid", "rank_1.pid")
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			cancel()
			if code := cmd.ProcessState.ExitCode(); code != tc.want {
				t.Fatalf("%v, trial %d: launcher exited %d, want %d:\n%s", tc.sig, trial, code, tc.want, out.String())
			}
			for _, r := range []string{"rank_0.saved", "rank_1.saved"} {
				if _, err := os.Stat(filepath.Join(dir, r)); err != nil {
					t.Errorf("%v, trial %d: %s: the rank did not get to save", tc.sig, trial, r)
				}
			}
		}
	}
}

// TestNodeLauncherSurvivesClosedOutput: a node launcher (as the ssh launcher
// starts one) whose output pipes are closed, as sshd closes them when the
// session ends, must still stop its ranks gracefully when its stdin ends,
// instead of dying of SIGPIPE at its next message and taking the ranks down
// with it before they save.
func TestNodeLauncherSurvivesClosedOutput(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	world := launch.EncodeWorldInfo([]launch.Node{{Host: "localhost", Slots: []int{0, 1}}})
	cmd := helperLaunch(ctx, "sleep", dir, nil, "launch", "--launcher", "local", "--world_info", world, "--node_rank", "0",
		"--master_addr", "127.0.0.1", "--master_port", "29999", "--grace-period", "10s", "--stdin-lifeline", "train")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = outW, outW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	waitFiles(t, dir, 20*time.Second, "rank_0.pid", "rank_1.pid")
	// The session ends: no one reads the output any more, and stdin closes.
	outR.Close()
	stdin.Close()
	_ = cmd.Wait()
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		t.Fatalf("the node launcher was killed by %v", ws.Signal())
	}
	if code := ws.ExitStatus(); code != 130 {
		t.Errorf("node launcher exited %d, want 130 (stopped because its stdin ended)", code)
	}
	for _, r := range []string{"rank_0.saved", "rank_1.saved"} {
		if _, err := os.Stat(filepath.Join(dir, r)); err != nil {
			t.Errorf("%s: the rank did not get to save", r)
		}
	}
}

// TestLaunchSurvivesClosedStdout is `gotrain launch ... | head -1`: the
// reader of the launcher's output goes away; training must go on to the
// end (the output is dropped) instead of rank 0 dying of SIGPIPE, or of
// the write error, at its next progress line.
func TestLaunchSurvivesClosedStdout(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dir, modelCfg, shard := distFixture(t)
	out := filepath.Join(dir, "run")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := gotrainCmd(ctx, "launch", "--nproc", "2", "--master_port", "0", "train", "--config", stageConfig(t, dir, 1, 2),
		"--model", modelCfg, "--data", shard, "--seq-len", "16", "--max-steps", "20", "--output-dir", out,
		"--peak-flops", "1e9", "--threads", "1", "--metrics-addr", "off")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	r.Close() // nobody will ever read
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("launch with a closed stdout: %v\n%s", err, stderr.String())
	}
	if steps := len(readLosses(t, filepath.Join(out, "metrics.jsonl"))); steps != 20 {
		t.Errorf("%d steps trained, want 20", steps)
	}
}

// TestUnresolvableMasterAddrFailsAtOnce: a MASTER_ADDR that is not a host
// (root@host, as copied from a hostfile) fails the launch before any rank
// starts, instead of ranks retrying for the whole --comm-timeout.
func TestUnresolvableMasterAddrFailsAtOnce(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := helperLaunch(ctx, "report", dir, nil, "launch", "--nproc", "2", "--master_port", "0", "--master_addr", "root@127.0.0.1", "train")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err == nil {
		t.Fatalf("launch with MASTER_ADDR root@127.0.0.1 succeeded:\n%s", out)
	}
	for _, want := range []string{`MASTER_ADDR "root@127.0.0.1" has a user name in it`, `"127.0.0.1"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if took > 10*time.Second {
		t.Errorf("took %v to fail", took)
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, "rank_*")); len(matches) > 0 {
		t.Errorf("ranks were started: %v", matches)
	}
}

// fakeSSH puts an ssh on PATH that records its arguments (one file per
// call, NUL-separated) and then does what mode says: "run" runs the remote
// command with sh, stdin included, as sshd would; "hostkey" fails as ssh
// does with an unknown host key under BatchMode.
func fakeSSH(t *testing.T, mode string) (pathEnv, logDir string) {
	t.Helper()
	bin, logDir := t.TempDir(), t.TempDir()
	script := `#!/bin/sh
log=$(mktemp "` + logDir + `/ssh.XXXXXX")
for a in "$@"; do printf '%s\0' "$a" >> "$log"; done
`
	switch mode {
	case "run":
		script += `for last in "$@"; do :; done
exec sh -c "$last"
`
	case "hostkey":
		script += `echo "Host key verification failed." >&2
exit 255
`
	}
	if err := os.WriteFile(filepath.Join(bin, "ssh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return "PATH=" + bin + ":" + os.Getenv("PATH"), logDir
}

// sshCalls returns the argv of every call of the fake ssh.
func sshCalls(t *testing.T, logDir string) [][]string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(logDir, "ssh.*"))
	var calls [][]string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"))
	}
	return calls
}

func writeHostfile(t *testing.T, text string) string {
	t.Helper()
	hf := filepath.Join(t.TempDir(), "hostfile")
	if err := os.WriteFile(hf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return hf
}

// TestSSHMasterAddrDropsUser: with a hostfile line "root@127.0.0.1", ssh
// logs in as root, but the ranks rendezvous at 127.0.0.1.
func TestSSHMasterAddrDropsUser(t *testing.T) {
	dir := t.TempDir()
	path, logDir := fakeSSH(t, "run")
	hf := writeHostfile(t, "root@127.0.0.1 slots=2\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := helperLaunch(ctx, "report", dir, []string{path}, "launch", "--hostfile", hf, "--launcher", "ssh", "--master_port", "0", "train")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("launch: %v\n%s", err, out)
	}
	calls := sshCalls(t, logDir)
	if len(calls) != 1 || !slices.Contains(calls[0], "root@127.0.0.1") {
		t.Fatalf("ssh calls %q, want one to root@127.0.0.1", calls)
	}
	for _, r := range []string{"0", "1"} {
		rep := readRankReport(t, filepath.Join(dir, "rank_"+r+".json"))
		if got := rep.Env["MASTER_ADDR"]; got != "127.0.0.1" {
			t.Errorf("rank %s: MASTER_ADDR=%q, want 127.0.0.1", r, got)
		}
	}
}

// TestLauncherArgsShellQuoting: --launcher_args is split as a shell splits
// words, so an option with spaces reaches ssh as one argument.
func TestLauncherArgsShellQuoting(t *testing.T) {
	dir := t.TempDir()
	path, logDir := fakeSSH(t, "run")
	hf := writeHostfile(t, "127.0.0.1 slots=1\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := helperLaunch(ctx, "report", dir, []string{path}, "launch", "--hostfile", hf, "--launcher", "ssh", "--master_port", "0",
		"--launcher_args", `-o 'ProxyCommand=ssh -W %h:%p gw' -i "/keys/my key" -o\ LogLevel=ERROR`, "train")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("launch: %v\n%s", err, out)
	}
	calls := sshCalls(t, logDir)
	if len(calls) != 1 {
		t.Fatalf("ssh calls %q", calls)
	}
	want := []string{"-o", "ProxyCommand=ssh -W %h:%p gw", "-i", "/keys/my key", "-o LogLevel=ERROR", "127.0.0.1"}
	i := slices.Index(calls[0], "-o")
	if i < 0 || i+len(want) > len(calls[0]) || !slices.Equal(calls[0][i+2:i+2+len(want)], want) {
		t.Errorf("ssh argv %q, want it to contain %q after BatchMode", calls[0], want)
	}
	// An unbalanced quote is an error before anything starts.
	bad := helperLaunch(ctx, "report", dir, []string{path}, "launch", "--hostfile", hf, "--launcher", "ssh", "--launcher_args", `-o 'ProxyCommand=ssh`, "train")
	out, err := bad.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--launcher_args") || !strings.Contains(string(out), "never closed") {
		t.Errorf("unbalanced quote: %v\n%s", err, out)
	}
}

// TestSSHHostKeyHint: ssh's bare "Host key verification failed" comes with
// what to do about it.
func TestSSHHostKeyHint(t *testing.T) {
	dir := t.TempDir()
	path, _ := fakeSSH(t, "hostkey")
	hf := writeHostfile(t, "worker-7 slots=1\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := helperLaunch(ctx, "report", dir, []string{path}, "launch", "--hostfile", hf, "--launcher", "ssh",
		"--master_addr", "127.0.0.1", "--ssh_port", "2222", "train")
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 255 {
		t.Errorf("launcher exited %d, want ssh's 255", code)
	}
	for _, want := range []string{"Host key verification failed", "ssh-keyscan -p 2222 worker-7 >> ~/.ssh/known_hosts", "StrictHostKeyChecking=accept-new"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// TestJobSecretInEveryRank: every rank of a launch, local or over ssh, gets
// the same GOTRAIN_JOB_SECRET (64 lowercase hex digits) and GOTRAIN_JOB_ID;
// two launches get different ones; the secret is on no command line (not
// ssh's, not the node launcher's, not a rank's); a secret the user exported
// is passed on as it is.
func TestJobSecretInEveryRank(t *testing.T) {
	path, logDir := fakeSSH(t, "run")
	hf := writeHostfile(t, "127.0.0.1 slots=2\nlocalhost slots=1\n")
	type job struct{ secret, id string }
	launchOnce := func(extraEnv []string, args ...string) (job, []rankReport) {
		t.Helper()
		dir := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := helperLaunch(ctx, "report", dir, append([]string{path}, extraEnv...), append(append([]string{"launch"}, args...), "train")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("launch %q: %v\n%s", args, err, out)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "rank_*.json"))
		var reps []rankReport
		var j job
		for i, f := range files {
			r := readRankReport(t, f)
			reps = append(reps, r)
			got := job{r.Env[launch.JobSecretEnv], r.Env[launch.JobIDEnv]}
			if i == 0 {
				j = got
			} else if got != j {
				t.Errorf("launch %q: %s has secret/id %q, rank of %s has %q", args, f, got, files[0], j)
			}
			for _, a := range r.Args {
				if j.secret != "" && strings.Contains(a, j.secret) {
					t.Errorf("launch %q: the secret is on the command line of %s: %q", args, f, r.Args)
				}
			}
		}
		return j, reps
	}
	local1, reps := launchOnce(nil, "--nproc", "3", "--master_port", "0")
	if len(reps) != 3 {
		t.Fatalf("%d local ranks reported, want 3", len(reps))
	}
	local2, _ := launchOnce(nil, "--nproc", "2", "--master_port", "0")
	ssh1, reps := launchOnce(nil, "--hostfile", hf, "--launcher", "ssh", "--master_port", "0")
	if len(reps) != 3 {
		t.Fatalf("%d ranks reported over ssh, want 3", len(reps))
	}
	ssh2, _ := launchOnce(nil, "--hostfile", hf, "--launcher", "ssh", "--master_port", "0")
	all := []job{local1, local2, ssh1, ssh2}
	for i, j := range all {
		if !hex64.MatchString(j.secret) {
			t.Errorf("launch %d: secret %q is not 64 lowercase hex digits", i, j.secret)
		}
		if b, err := hex.DecodeString(j.id); err != nil || len(b) != 8 {
			t.Errorf("launch %d: job id %q is not 16 hex digits", i, j.id)
		}
		for k := range i {
			if all[k].secret == j.secret || all[k].id == j.id {
				t.Errorf("launches %d and %d share a secret or id: %q", k, i, j)
			}
		}
	}
	// A secret the user set reaches every rank unchanged, over ssh too.
	const mine = "my own secret, with spaces"
	got, _ := launchOnce([]string{launch.JobSecretEnv + "=" + mine}, "--hostfile", hf, "--launcher", "ssh", "--master_port", "0")
	if got.secret != mine {
		t.Errorf("user-set secret arrived as %q", got.secret)
	}
	for _, call := range sshCalls(t, logDir) {
		for _, secret := range []string{ssh1.secret, ssh2.secret, mine} {
			if secret != "" && strings.Contains(strings.Join(call, " "), secret) {
				t.Errorf("the secret %q is on ssh's command line: %q", secret, call)
			}
		}
	}
}

// TestSlurmGenerateScript runs the generated sbatch script with stand-ins
// for scontrol and srun: srun is this gotrain's absolute path, a
// MASTER_ADDR set at submission wins over the first node, and every run of
// the script draws a new 64-hex-digit GOTRAIN_JOB_SECRET that srun passes
// on in its environment.
func TestSlurmGenerateScript(t *testing.T) {
	script, _, err := run(t, "slurm", "generate", "--nodes", "2", "--ntasks-per-node", "2", "--", "--config", "ds.json")
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(script, "\nsrun --kill-on-bad-exit=1 "+launch.ShellQuote(exe)+" train --config ds.json\n") {
		t.Errorf("script does not run this binary (%s):\n%s", exe, script)
	}
	bin := t.TempDir()
	stub := func(name, body string) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stub("scontrol", "printf 'node-a\\nnode-b\\n'\n")
	stub("srun", `printf '%s\n%s\n%s\n%s\n' "$MASTER_ADDR" "$MASTER_PORT" "$GOTRAIN_JOB_SECRET" "$GOTRAIN_JOB_ID" > "$SRUN_REPORT"`+"\n")
	sbatch := filepath.Join(t.TempDir(), "job.sbatch")
	if err := os.WriteFile(sbatch, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	runScript := func(extra ...string) []string {
		t.Helper()
		report := filepath.Join(t.TempDir(), "srun")
		cmd := exec.Command("bash", sbatch)
		cmd.Env = append([]string{"PATH=" + bin + ":/usr/bin:/bin", "SLURM_JOB_NODELIST=node-[a-b]", "SRUN_REPORT=" + report}, extra...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("script: %v\n%s", err, out)
		}
		b, err := os.ReadFile(report)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
	first := runScript()
	if first[0] != "node-a" || first[1] != "29500" || !hex64.MatchString(first[2]) || len(first[3]) != 16 {
		t.Errorf("srun saw MASTER_ADDR, MASTER_PORT, secret, id = %q", first)
	}
	submitted := runScript("MASTER_ADDR=10.1.2.3", "MASTER_PORT=40000")
	if submitted[0] != "10.1.2.3" || submitted[1] != "40000" {
		t.Errorf("submitted MASTER_ADDR/MASTER_PORT became %q", submitted[:2])
	}
	if submitted[2] == first[2] || submitted[3] == first[3] {
		t.Errorf("two runs of the script share a secret or id: %q, %q", first[2:], submitted[2:])
	}
	if mine := runScript(launch.JobSecretEnv + "=mine"); mine[2] != "mine" {
		t.Errorf("a submitted secret became %q", mine[2])
	}
}

// TestHandStartedRankWithUnresolvableMasterAddrFailsAtOnce: a rank started
// without gotrain launch (torchrun-style variables) whose MASTER_ADDR no
// resolver knows fails before the rendezvous, not after retrying for the
// whole --comm-timeout.
func TestHandStartedRankWithUnresolvableMasterAddrFailsAtOnce(t *testing.T) {
	dir, modelCfg, shard := distFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := gotrainCmd(ctx, "train", "--config", stageConfig(t, dir, 0, 2), "--model", modelCfg, "--data", shard,
		"--seq-len", "16", "--max-steps", "2", "--output-dir", filepath.Join(dir, "out"), "--metrics-addr", "off",
		"--comm-timeout", "10m")
	cmd.Env = append(cmd.Env, "RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",
		"MASTER_ADDR=no-such-host.invalid", "MASTER_PORT=29999")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("rank 1 with an unresolvable MASTER_ADDR succeeded:\n%s", out)
	}
	if !strings.Contains(string(out), "no-such-host.invalid") {
		t.Errorf("the error does not name MASTER_ADDR:\n%s", out)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("took %v to fail", took)
	}
}
