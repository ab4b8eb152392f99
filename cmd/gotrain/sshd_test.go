package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gotrain/gotrain/checkpoint"
	"github.com/gotrain/gotrain/launch"
)

// These tests run `gotrain launch --launcher ssh` against a real OpenSSH
// server that the test starts on 127.0.0.1 and 127.0.0.2 (two "nodes") with
// its own host and client keys. They skip when sshd is absent, unless
// GOTRAIN_REQUIRE_SSHD is set (CI installs openssh-server), and then fail.

const sshdPath = "/usr/sbin/sshd"

type sshServer struct {
	port       int
	key        string // the client's private key
	knownHosts string // the server's host key for both addresses
	user       string
	log        *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func needSSHD(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("GOTRAIN_REQUIRE_SSHD") != "" {
		t.Fatalf("GOTRAIN_REQUIRE_SSHD is set but %s", why)
	}
	t.Skipf("%s; install openssh-server (and set GOTRAIN_REQUIRE_SSHD=1 to make this a failure)", why)
}

func startSSHD(t *testing.T) *sshServer {
	t.Helper()
	if testing.Short() {
		t.Skip("starts sshd and real ranks")
	}
	if _, err := os.Stat(sshdPath); err != nil {
		needSSHD(t, sshdPath+" is missing")
	}
	for _, tool := range []string{"ssh", "ssh-keygen"} {
		if _, err := exec.LookPath(tool); err != nil {
			needSSHD(t, tool+" is missing")
		}
	}
	if os.Geteuid() != 0 {
		needSSHD(t, "sshd's privilege separation needs root")
	}
	// sshd's privilege separation directory; a package install creates it
	// at boot, which a container never has.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatalf("sshd needs /run/sshd: %v", err)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keygen := func(name string) string {
		path := filepath.Join(dir, name)
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", path).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
		return path
	}
	hostKey, clientKey := keygen("host_key"), keygen("client_key")
	hostPub, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	clientPub, err := os.ReadFile(clientKey + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	authorized := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authorized, clientPub, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	knownHosts := filepath.Join(dir, "known_hosts")
	fields := strings.Fields(string(hostPub))
	kh := fmt.Sprintf("[127.0.0.1]:%d %s %s\n[127.0.0.2]:%d %s %s\n", port, fields[0], fields[1], port, fields[0], fields[1])
	if err := os.WriteFile(knownHosts, []byte(kh), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`ListenAddress 127.0.0.1:%d
ListenAddress 127.0.0.2:%d
HostKey %s
AuthorizedKeysFile %s
PidFile %s
UsePAM no
StrictModes no
PermitRootLogin yes
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
X11Forwarding no
PrintMotd no
MaxStartups 50
MaxSessions 50
LogLevel ERROR
`, port, port, hostKey, authorized, filepath.Join(dir, "sshd.pid"))), 0o644); err != nil {
		t.Fatal(err)
	}
	log := &lockedBuffer{}
	cmd := exec.Command(sshdPath, "-D", "-e", "-f", cfg)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sshd: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(10 * time.Second)
	for _, host := range []string{"127.0.0.1", "127.0.0.2"} {
		for {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-exited:
				t.Fatalf("sshd exited:\n%s", log)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("sshd does not listen on %s:%d: %v\n%s", host, port, err, log)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return &sshServer{port: port, key: clientKey, knownHosts: knownHosts, user: u.Username, log: log}
}

// launchArgs is `launch --hostfile ... --launcher ssh ...` for two nodes of
// one rank each: user@127.0.0.1 (as a hostfile may name it) and 127.0.0.2.
func (s *sshServer) launchArgs(t *testing.T, knownHosts string) []string {
	t.Helper()
	hf := writeHostfile(t, fmt.Sprintf("%s@127.0.0.1 slots=1\n127.0.0.2 slots=1\n", s.user))
	sshArgs := launch.ShellJoin([]string{"-F", "/dev/null", "-i", s.key, "-o", "IdentitiesOnly=yes",
		"-o", "UserKnownHostsFile=" + knownHosts, "-o", "GlobalKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"})
	return []string{"launch", "--hostfile", hf, "--launcher", "ssh", "--ssh_port", strconv.Itoa(s.port),
		"--launcher_args", sshArgs, "--master_port", "0", "--grace-period", "20s"}
}

// sshTraining starts a 2-rank training run over ssh that would run for
// hours, and waits until rank 0 has logged a few steps. mark tells this
// run's processes apart in /proc.
func sshTraining(t *testing.T, s *sshServer, mark string) (cmd *exec.Cmd, out string, output *lockedBuffer) {
	t.Helper()
	dir, modelCfg, shard := distFixture(t)
	out = filepath.Join(dir, "run")
	args := append(s.launchArgs(t, s.knownHosts), "train", "--config", stageConfig(t, dir, 2, 2), "--model", modelCfg,
		"--data", shard, "--seq-len", "16", "--max-steps", "1000000", "--output-dir", out, "--peak-flops", "1e9",
		"--threads", "1", "--metrics-addr", "off")
	cmd = gotrainCmd(context.Background(), args...)
	// GOTRAIN_* variables reach the nodes (ForwardedEnv).
	cmd.Env = append(cmd.Env, "GOTRAIN_TEST_SSH_MARK="+mark)
	output = &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = output, output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		for _, pid := range markedRanks(mark) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, _ := os.ReadFile(filepath.Join(out, "metrics.jsonl")); bytes.Count(b, []byte("\n")) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("training over ssh did not start:\n%s\nsshd:\n%s", output, s.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cmd, out, output
}

// markedRanks finds this run's rank processes (RANK=r in their environment
// with GOTRAIN_TEST_SSH_MARK=mark), indexed by rank: over ssh they are
// children of sshd's sessions, not of the launcher.
func markedRanks(mark string) map[int]int {
	out := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, []byte("\x00GOTRAIN_TEST_SSH_MARK="+mark+"\x00")) {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if r, ok := strings.CutPrefix(string(kv), "RANK="); ok {
				if n, err := strconv.Atoi(r); err == nil {
					out[n] = pid
				}
			}
		}
	}
	return out
}

func procEnv(t *testing.T, pid int, name string) string {
	t.Helper()
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range strings.Split(string(env), "\x00") {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// TestSSHStopSavesCheckpoint is Ctrl-C (and a scheduler's SIGTERM) over
// ssh: the ranks on both nodes save a checkpoint that verifies, and the
// launcher exits 130 (143). The ssh sessions are not torn down under the
// node launchers: their stdin closes, they stop their ranks, and only then
// does ssh end. While it runs, both ranks hold the same job secret, which
// is on no process's command line.
func TestSSHStopSavesCheckpoint(t *testing.T) {
	s := startSSHD(t)
	for _, tc := range []struct {
		sig  syscall.Signal
		want int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		t.Run(launch.SignalName(tc.sig), func(t *testing.T) {
			mark := fmt.Sprintf("stop-%d-%d", tc.sig, time.Now().UnixNano())
			cmd, out, output := sshTraining(t, s, mark)
			ranks := markedRanks(mark)
			if len(ranks) != 2 {
				t.Fatalf("found ranks %v, want 2", ranks)
			}
			secret := procEnv(t, ranks[0], launch.JobSecretEnv)
			if !hex64.MatchString(secret) || procEnv(t, ranks[1], launch.JobSecretEnv) != secret {
				t.Errorf("ranks hold secrets %q and %q, want one 64-hex-digit secret", secret, procEnv(t, ranks[1], launch.JobSecretEnv))
			}
			if pids := cmdlinesContaining(secret); secret != "" && len(pids) > 0 {
				t.Errorf("the job secret is on the command line of processes %v", pids)
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			waitExit(t, cmd, 90*time.Second)
			if code := cmd.ProcessState.ExitCode(); code != tc.want {
				t.Errorf("launcher exited %d after %v, want %d:\n%s", code, tc.sig, tc.want, output)
			}
			tag := verifiedLatest(t, filepath.Join(out, "checkpoints"))
			t.Logf("after %v over ssh: latest checkpoint %s verifies; launcher said:\n%s", tc.sig, tag, lastLines(output.String(), 5))
			assertRanksGone(t, ranks)
		})
	}
}

// TestSSHKilledRankIsBlamed: kill -9 of rank 1 (on node 1) over ssh; rank 0
// (on node 0) fails with "lost rank 1" too. The launcher must name node 1
// and its rank 1 and exit 137, not blame node 0.
func TestSSHKilledRankIsBlamed(t *testing.T) {
	s := startSSHD(t)
	for trial := range 2 {
		mark := fmt.Sprintf("kill-%d-%d", trial, time.Now().UnixNano())
		cmd, _, output := sshTraining(t, s, mark)
		ranks := markedRanks(mark)
		if len(ranks) != 2 {
			t.Fatalf("found ranks %v, want 2", ranks)
		}
		if err := syscall.Kill(ranks[1], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitExit(t, cmd, 60*time.Second)
		if code := cmd.ProcessState.ExitCode(); code != 137 {
			t.Errorf("trial %d: launcher exited %d, want 137:\n%s", trial, code, output)
		}
		verdict := lastLines(output.String(), 1)
		want := fmt.Sprintf("rank 1 (pid %d) was killed by signal KILL", ranks[1])
		if !strings.HasPrefix(verdict, "gotrain: node 1 (127.0.0.2)") || !strings.Contains(verdict, want) {
			t.Errorf("trial %d: verdict %q, want node 1 (127.0.0.2) and %q; launcher said:\n%s", trial, verdict, want, output)
		}
		t.Logf("trial %d: launcher said:\n%s", trial, lastLines(output.String(), 4))
		assertRanksGone(t, ranks)
	}
}

// TestSSHUnknownHostKey: the first connection to a node whose host key is
// not known fails under BatchMode; the launcher says how to fix it.
func TestSSHUnknownHostKey(t *testing.T) {
	s := startSSHD(t)
	empty := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := helperLaunch(ctx, "report", t.TempDir(), nil, append(s.launchArgs(t, empty), "train")...)
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 255 {
		t.Errorf("launcher exited %d, want ssh's 255", code)
	}
	for _, want := range []string{"Host key verification failed", fmt.Sprintf("ssh-keyscan -p %d 127.0.0.", s.port), "StrictHostKeyChecking=accept-new"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func waitExit(t *testing.T, cmd *exec.Cmd, limit time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the launcher did not exit within %v", limit)
	}
}

// verifiedLatest returns the tag "latest" names in dir after checking every
// checksum of it.
func verifiedLatest(t *testing.T, dir string) string {
	t.Helper()
	tags, err := checkpoint.List(dir)
	if err != nil {
		t.Fatalf("no checkpoint: %v", err)
	}
	for _, tag := range tags {
		if !tag.Latest {
			continue
		}
		r, err := checkpoint.Open(dir, tag.Tag)
		if err != nil {
			t.Fatalf("open %s: %v", tag.Tag, err)
		}
		defer r.Close()
		if err := r.Verify(); err != nil {
			t.Fatalf("verify %s: %v", tag.Tag, err)
		}
		return tag.Tag
	}
	t.Fatalf("no checkpoint named by latest in %s (tags %+v)", dir, tags)
	return ""
}

// cmdlinesContaining returns the pids whose command line holds s.
func cmdlinesContaining(s string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Contains(b, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func assertRanksGone(t *testing.T, ranks map[int]int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r, pid := range ranks {
		for syscall.Kill(pid, 0) == nil && !zombie(pid) {
			if time.Now().After(deadline) {
				t.Errorf("rank %d (pid %d) is still running", r, pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}
